/* lazygit: a preload for the unit tests' valgrind runs (scripts/valgrind-test.sh loads the
 * libvalgrind-lazygit.so it finds next to the test binary).
 *
 * libcriterion initialises libgit2 (which it uses only to print diffs of failed string
 * assertions) when every test process starts, and Debian's libgit2 parses the whole system CA
 * bundle in that initialisation: about 56 million instructions, half a second under memcheck,
 * in each of the ~700 processes a valgrind pass starts. This library answers the eager
 * git_libgit2_init() without doing it and runs the real one just before the first diff, so a
 * failing assertion still prints its diff. It changes nothing in the code under test. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef int (*vg_init_fn)(void);
typedef int (*vg_diff_fn)(const void *, size_t, const char *, const void *, size_t, const char *,
                          const void *, void *, void *, void *, void *, void *);

static pthread_once_t vg_once = PTHREAD_ONCE_INIT;
static int vg_inited;

static void vg_real_init(void)
{
    vg_init_fn f = (vg_init_fn)dlsym(RTLD_NEXT, "git_libgit2_init");
    vg_inited = f && f() > 0;
}

int git_libgit2_init(void);
int git_libgit2_shutdown(void);
int git_diff_buffers(const void *old_buf, size_t old_len, const char *old_path, const void *new_buf,
                     size_t new_len, const char *new_path, const void *opts, void *file_cb,
                     void *binary_cb, void *hunk_cb, void *line_cb, void *payload);

int git_libgit2_init(void)
{
    return 1; /* "initialised once", as the real one answers on its first call */
}

int git_libgit2_shutdown(void)
{
    if (!vg_inited)
        return 0;
    vg_init_fn f = (vg_init_fn)dlsym(RTLD_NEXT, "git_libgit2_shutdown");
    return f ? f() : 0;
}

int git_diff_buffers(const void *old_buf, size_t old_len, const char *old_path, const void *new_buf,
                     size_t new_len, const char *new_path, const void *opts, void *file_cb,
                     void *binary_cb, void *hunk_cb, void *line_cb, void *payload)
{
    pthread_once(&vg_once, vg_real_init);
    vg_diff_fn f = (vg_diff_fn)dlsym(RTLD_NEXT, "git_diff_buffers");
    if (!f)
        return -1;
    return f(old_buf, old_len, old_path, new_buf, new_len, new_path, opts, file_cb, binary_cb,
             hunk_cb, line_cb, payload);
}
