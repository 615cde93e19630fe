# Warden: announces reads of credential-like environment variables to the tracer (an
# in-process observation, like the getenv interposer: the program could bypass it).
import os as _os


def _warden_install():
    words = (@WORDS@)
    state = {}

    def report(name):
        try:
            fn = state.get("syscall")
            if fn is None:
                import ctypes

                fn = state["syscall"] = ctypes.CDLL(None).syscall
            fn(@NR@, name.encode("utf-8", "replace"), 1)
        except Exception:
            pass

    cls = _os._Environ
    original = cls.__getitem__

    def __getitem__(self, key):
        if isinstance(key, str) and any(w in key.upper() for w in words):
            report(key)
        return original(self, key)

    cls.__getitem__ = __getitem__


_warden_install()
del _warden_install
