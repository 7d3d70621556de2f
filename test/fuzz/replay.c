/* replay.c -- feed files to the fuzz target without libFuzzer: every file
 * of each directory named on the command line (sorted, not recursive) and
 * every plain file named.  Built with the normal compiler and linked to the
 * real libattn, so `meson test fuzz-replay` checks the committed corpus and
 * regressions with the real BLAS.  ATTN_TEST_QUICK=1 (valgrind) replays
 * every fourth file of a directory.  Exit status 0, or the abort() of the
 * first contract violation. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static long replayed;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    uint8_t chunk[4096];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got > cap) {
            cap = (len + got) * 2;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        memcpy(buf + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "%s: ", path);
    /* libFuzzer passes a buffer of exactly the input's size */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact)
        abort();
    if (len)
        memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    free(buf);
    replayed++;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_dir(const char *dir, int stride)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        exit(1);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names)
                abort();
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(l);
        if (!names[n])
            abort();
        snprintf(names[n], l, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (i % (size_t)stride == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            run_file(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    const char *q = getenv("ATTN_TEST_QUICK");
    const int stride = q && atoi(q) ? 4 : 1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode))
            run_dir(argv[i], stride);
        else
            run_file(argv[i]);
    }
    printf("replayed %ld inputs\n", replayed);
    return 0;
}
