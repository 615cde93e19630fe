/* Warden's environment interposer, preloaded into traced programs (the jail's /etc/ld.so.preload).
 *
 * getenv and secure_getenv behave exactly like glibc's (they look the name up in `environ`);
 * when the name looks like a credential, the lookup is first announced to the tracer with a
 * prctl option no kernel implements, which the jail's seccomp filter hands to the tracer and
 * the kernel then fails with EINVAL (prctl, which container runtimes' seccomp profiles allow,
 * where they refuse an unknown syscall number). errno is preserved. This is an in-process observation: a
 * program can bypass or imitate it, which is why the tracer marks these events as such. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "words.h" /* WARDEN_WORDS, WARDEN_ENV_READ_OPTION: generated from words.txt by build.rs */

extern char **environ;

static int credential_like(const char *name) {
    for (const char *const *w = WARDEN_WORDS; *w; w++)
        if (strcasestr(name, *w))
            return 1;
    return 0;
}

static char *lookup(const char *name) {
    size_t len = strlen(name);
    if (!environ)
        return NULL;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

char *getenv(const char *name) {
    if (!name)
        return NULL;
    if (credential_like(name)) {
        int saved = errno;
        syscall(SYS_prctl, WARDEN_ENV_READ_OPTION, name, 0L);
        errno = saved;
    }
    return lookup(name);
}

char *secure_getenv(const char *name) {
    if (getauxval(AT_SECURE))
        return NULL;
    return getenv(name);
}
