/* The run board: see run_board.h. */
#include "run_board.h"
#include "monotonic.h"

#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

static size_t board_bytes(int world_size) { return sizeof(run_board) + sizeof(rank_slot) * (size_t)world_size; }

run_board *run_board_create(int world_size) {
    run_board *b = mmap(NULL, board_bytes(world_size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return NULL;
    b->world_size = world_size;
    long long now = run_board_now_ms();
    for (int r = 0; r < world_size; r++) {
        atomic_store(&b->slot[r].epoch, -1);
        atomic_store(&b->slot[r].progress_ms, now);
    }
    return b;
}

void run_board_destroy(run_board *b) {
    if (b) munmap(b, board_bytes(b->world_size));
}

void run_board_set_position(run_board *b, int rank, int epoch, long step, long global_step) {
    atomic_store_explicit(&b->slot[rank].epoch, epoch, memory_order_relaxed);
    atomic_store_explicit(&b->slot[rank].step, step, memory_order_relaxed);
    atomic_store_explicit(&b->slot[rank].global_step, global_step, memory_order_relaxed);
    atomic_store_explicit(&b->slot[rank].progress_ms, run_board_now_ms(), memory_order_relaxed);
}

void run_board_enter_collective(run_board *b, int rank) {
    atomic_fetch_add_explicit(&b->slot[rank].collectives, 1, memory_order_relaxed);
    atomic_store_explicit(&b->slot[rank].progress_ms, run_board_now_ms(), memory_order_relaxed);
}

long long run_board_now_ms(void) { return mono_ms(); }

void run_board_set_failure(run_board *b, int rank, const char *why) {
    snprintf(b->slot[rank].failure, sizeof b->slot[rank].failure, "%s", why);
}

void run_board_request_preempt(run_board *b) { atomic_store(&b->preempt, 1); }

long run_board_stop_after(run_board *b, long done) {
    long at = atomic_load(&b->stop_at);
    if (at || !atomic_load(&b->preempt)) return at;
    long none = 0;
    atomic_compare_exchange_strong(&b->stop_at, &none, done + 1); /* the first rank to ask fixes it */
    return atomic_load(&b->stop_at);
}

void run_board_set_preempted(run_board *b, int rank) { atomic_store(&b->slot[rank].preempted, 1); }

void run_board_set_paused(run_board *b, int rank) { atomic_store(&b->slot[rank].paused, 1); }
