# Warden: announces reads of credential-like environment variables to the tracer (an
# in-process observation, like the getenv interposer: the program could bypass it).
import os as _os


def _warden_hide():
    # The interposer put this folder first in PYTHONPATH (so that this hook loads); the program
    # sees the PYTHONPATH it was given, in os.environ, the C environment and sys.path.
    import sys

    hook = "@HOOK@"
    value = _os.environ._data.get(_os.environ.encodekey("PYTHONPATH"))
    if value is not None:
        parts = _os.environ.decodevalue(value).split(":")
        if parts[0] == hook:
            parts = parts[1:]
            if parts:
                _os.environ["PYTHONPATH"] = ":".join(parts)
            else:
                del _os.environ["PYTHONPATH"]
    sys.path[:] = [p for p in sys.path if p != hook]



def _warden_install():
    words = (@WORDS@)
    state = {}

    def report(name):
        try:
            fn = state.get("syscall")
            if fn is None:
                import ctypes

                fn = state["syscall"] = ctypes.CDLL(None).syscall
            fn(@NR@, @OPTION@, name.encode("utf-8", "replace"), 1)
        except Exception:
            pass

    cls = _os._Environ
    original = cls.__getitem__

    def __getitem__(self, key):
        if isinstance(key, str) and any(w in key.upper() for w in words):
            report(key)
        return original(self, key)

    cls.__getitem__ = __getitem__

    # A whole copy or walk (subprocess environments, proxy discovery, GitPython) is not a read
    # of any one credential: these go to the raw data without reporting.
    def copy(self):
        return {self.decodekey(k): self.decodevalue(v) for k, v in self._data.items()}

    cls.copy = copy
    cls.items = lambda self: copy(self).items()
    cls.values = lambda self: copy(self).values()


def _warden_chain():
    # The sitecustomize this one shadows runs too, and takes its place in sys.modules (pip's
    # build isolation puts one of its own on PYTHONPATH; Debian has one in the standard library).
    import importlib.machinery
    import importlib.util
    import sys

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_warden_hide()
_warden_install()
_warden_chain()
del _warden_hide, _warden_install, _warden_chain
