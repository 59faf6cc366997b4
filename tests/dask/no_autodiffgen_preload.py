"""A Dask worker preload (LocalCluster(preload=[this file])): makes `import autodiffgen`
fail in the worker's process, as on a cluster where only NumPy is installed."""

import sys


class _NoAutodiffgen:
    """A meta path finder that refuses autodiffgen and its submodules."""

    def find_spec(self, name, path=None, target=None):
        if name == "autodiffgen" or name.startswith("autodiffgen."):
            raise ModuleNotFoundError(f"No module named {name!r} (not installed on this "
                                      "worker)", name=name)


sys.meta_path.insert(0, _NoAutodiffgen())
for _name in [m for m in sys.modules if m == "autodiffgen" or m.startswith("autodiffgen.")]:
    del sys.modules[_name]
