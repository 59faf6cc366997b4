"""Names for the public API's type annotations (the package ships py.typed): what a user
passes in and gets back. Arrays and pytrees are `Any`: a pytree holds arrays, numbers
and any registered type, and NumPy's own stubs do not say more for our purposes."""

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeVar

Fun: TypeAlias = Callable[..., Any]
"""A NumPy function to differentiate (or one made by this package)."""
ArgNums: TypeAlias = int | str | Sequence[int | str]
"""Which arguments to differentiate: a position, a parameter name, or several."""
PyTree: TypeAlias = Any
"""An array, a number, or a dict/list/tuple/dataclass/registered type holding them."""
F = TypeVar("F", bound=Callable[..., Any])
"""A function given back with its own signature (checkpoint, primitive)."""
