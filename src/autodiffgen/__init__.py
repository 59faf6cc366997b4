"""autodiffgen: trace a NumPy function once, emit its derivatives as readable NumPy code.

    from autodiffgen import grad, value_and_grad
    loss_and_grads = value_and_grad(loss, argnums=(0, 1))
    value, (gW, gb) = loss_and_grads(W, b, x, y)
    print(loss_and_grads.source(W, b, x, y))
"""

from . import list_arguments, rules, tape  # noqa: F401  (they register rules and hooks)
from ._version import __version__
from .api import (
    GradFunction,
    elementwise_grad,
    emit,
    grad,
    grad_and_aux,
    standalone_source,
    value_and_grad,
)
from .backward.checkpointing import checkpoint
from .cache.retrace import explain_retraces
from .custom import defjvp, defvjp, primitive, stop_gradient
from .custom_derivatives import custom_jvp, custom_vjp
from .errors import (
                     ArgumentError,
                     AutodiffgenError,
                     GuardError,
                     OutputError,
                     TracingError,
                     UnsupportedOperationError,
)
from .jacobians import hessian, jacfwd, jacobian, jacrev
from .picture import graph_of
from .transforms import hvp, jvp, vjp, vmap
from .tree import register_pytree_node

__all__ = [
                     "ArgumentError",
                     "AutodiffgenError",
                     "GradFunction",
                     "GuardError",
                     "OutputError",
                     "TracingError",
                     "UnsupportedOperationError",
                     "__version__",
                     "checkpoint",
                     "custom_jvp",
                     "custom_vjp",
                     "defjvp",
                     "defvjp",
                     "elementwise_grad",
                     "emit",
                     "explain_retraces",
                     "grad",
                     "grad_and_aux",
                     "graph_of",
                     "hessian",
                     "hvp",
                     "jacfwd",
                     "jacobian",
                     "jacrev",
                     "jvp",
                     "primitive",
                     "register_pytree_node",
                     "standalone_source",
                     "stop_gradient",
                     "value_and_grad",
                     "vjp",
                     "vmap",
]
