/* Unit tests of server/lib/path_redact.c: a root named where it stands as a whole
 * path or leading directories and nowhere else (not in a longer name, not inside
 * another path), the longest root first, in JSON as in plain text, a real path
 * named as the one given, and nothing replaced once disabled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "path_redact.h"

/* `text` through the rules, as a new string. */
static char *redacted(const char *text) {
    size_t len = strlen(text);
    char *t = xstrndup(text, len);
    path_redact_apply(&t, &len);
    char *out = xstrndup(t, len);
    free(t);
    return out;
}

static void expect(const char *in, const char *want) {
    char *got = redacted(in);
    CHECK(strcmp(got, want) == 0, "%s -> %s (got %s)", in, want, got);
    free(got);
}

int main(void) {
    path_redact_add("/srv/ddpd/state/", "<state-dir>");
    path_redact_add("/srv/ddpd/state/datasets", "<data-root-2>");
    path_redact_add("/usr/share/dataset-fashion-mnist", "<data-root-1>");
    path_redact_add("relative/dir", "<never>"); /* not absolute: no rule */
    expect("{\"path\":\"/srv/ddpd/state/runs/3/checkpoints/epoch-0000.safetensors\"}",
           "{\"path\":\"<state-dir>/runs/3/checkpoints/epoch-0000.safetensors\"}");
    expect("the state dir /srv/ddpd/state is full", "the state dir <state-dir> is full");
    expect("cache /srv/ddpd/state/datasets/x.f32 changed", "cache <data-root-2>/x.f32 changed");
    expect("no file \"a\" in the data roots (/usr/share/dataset-fashion-mnist, /srv/ddpd/state/datasets)",
           "no file \"a\" in the data roots (<data-root-1>, <data-root-2>)");
    expect("/srv/ddpd/stateful/x and /srv/ddpd/state.old", "/srv/ddpd/stateful/x and /srv/ddpd/state.old");
    expect("/home/u/srv/ddpd/state/x", "/home/u/srv/ddpd/state/x");
    expect("a//srv/ddpd/state", "a//srv/ddpd/state");
    expect("relative/dir/x", "relative/dir/x");
    expect("line one\\n/srv/ddpd/state\\nline two", "line one\\n<state-dir>\\nline two");
    expect("/srv/ddpd/state/a /srv/ddpd/state/b", "<state-dir>/a <state-dir>/b");
    expect("nothing here", "nothing here");
    size_t len = 0;
    char *none = NULL;
    CHECK(!path_redact_apply(&none, &len), "no text: nothing to do");

    /* a root given through a symlink is named under its real path too */
    char dir[] = "/tmp/ddpd-redact-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a scratch dir");
    char *real = xasprintf("%s/real", dir), *link = xasprintf("%s/link", dir);
    CHECK(mkdir(real, 0700) == 0 && symlink(real, link) == 0, "a dir and a link to it");
    path_redact_add(link, "<work-root>");
    char *in = xasprintf("%s/job and %s/job", real, link);
    char *got = redacted(in);
    CHECK(strcmp(got, "<work-root>/job and <work-root>/job") == 0, "both spellings named: %s", got);
    free(got);
    free(in);
    unlink(link);
    rmdir(real);
    rmdir(dir);
    free(real);
    free(link);

    path_redact_disable();
    expect("/srv/ddpd/state/runs/1", "/srv/ddpd/state/runs/1");
    path_redact_clear();
    path_redact_add("/srv/ddpd/state", "<state-dir>");
    expect("/srv/ddpd/state/runs/1", "<state-dir>/runs/1");
    path_redact_clear();
    return test_done("test_path_redact");
}
