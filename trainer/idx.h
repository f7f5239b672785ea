/* IDX files (the MNIST family's format), gzipped or plain, loaded and checked:
 * magic, dimensions, counts, and images against labels. */
#ifndef DDPD_TRAINER_IDX_H
#define DDPD_TRAINER_IDX_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "data_open.h"

typedef struct {
    uint8_t *images; /* count * rows * cols, row-major, one byte per pixel */
    uint8_t *labels; /* count */
    size_t count;
    int rows, cols;
    int num_classes; /* max label + 1 */
    void *mapping;   /* set when images/labels point into a mapped cache file */
    size_t mapping_bytes;
    char cache_path[4096]; /* that file, to explain a SIGBUS if it is cut short under the run */
    int cache_fd;          /* it, held open (only when mapping is set): its size and time now, whatever its name */
    struct timespec cache_mtime; /* its modification time when mapped */
} idx_dataset;

/* Every file is opened through data_open(roots, ...) (roots NULL: as given), and
 * named in messages relative to its data root.
 *
 * Loads an images file (magic 0x00000803, unsigned byte, 3 dims) and a labels file
 * (0x00000801, 1 dim), keeping the first `limit` examples (0 = all). On failure
 * returns -1 and writes into `err` a sentence naming the file and what is wrong
 * ("train-images.gz: truncated: header says 60000 images of 28x28 (47040016 bytes) but
 * the file holds 1000 bytes"). A header is held against the file before anything is
 * allocated for it: at most 10^8 examples of at most 10^6 pixels, a plain file's exact
 * size, and a gzipped file's data read into a buffer that grows only as it arrives. */
int idx_load(const data_roots *roots, const char *images_path, const char *labels_path, size_t limit,
             idx_dataset *out, char *err, size_t errlen);
void idx_free(idx_dataset *d);

/* idx_load through a cache of decompressed datasets in `cache_dir` (NULL: no cache):
 * the first load writes the whole dataset there, checked, under a name derived from
 * both files' identity (path, inode, size, mtime); later loads map that file, which
 * takes milliseconds instead of a decompression and shares the pages between ranks
 * and runs. Any cache problem falls back to idx_load (and says so in `note`). */
int idx_load_cached(const data_roots *roots, const char *images_path, const char *labels_path, size_t limit, const char *cache_dir,
                    idx_dataset *out, char *err, size_t errlen, char *note, size_t notelen);

/* The cache directory: $DDPD_CACHE_DIR, else $XDG_CACHE_HOME/ddpd, else
 * $HOME/.cache/ddpd; NULL when none is set. */
const char *idx_default_cache_dir(char *buf, size_t buflen);

/* After a rank died of SIGBUS: if `d` is mapped from a cache file that is now shorter
 * than the mapping or was modified after it was mapped (cut short or rewritten in place
 * under the run, whether or not its name is still there), writes a sentence naming it
 * and what to do into out and returns 1; else 0 (the SIGBUS had another cause). */
int idx_cache_explain_bus_error(const idx_dataset *d, char *out, size_t n);

/* Maps the examples of a mapped cache file (the first `count`, and their labels) into
 * this process's page tables now. A forked rank inherits the mapping but not its
 * page table entries, so without this its first epoch takes a minor fault on each
 * page it reads: a shuffled batch of 128 rows touches 128 pages, about 0.1 ms of a
 * 3.4 ms MLP step. A no-op for a dataset read into memory. */
void idx_cache_map_in(const idx_dataset *d);

#endif
