"""Optimizers over pytrees of parameters, with torch.optim's update formulas and defaults.

    opt = Adam(lr=1e-3)                 # SGD, Adam, AdamW, RMSprop
    state = opt.init(params)            # a pytree of arrays: {"step": 0-d, "m": ..., ...}
    params, state = opt.update(params, grads, state)      # new arrays, the new params
    step = compile_step(loss, opt)      # forward + backward + update: one generated function
    value = step(params, state, x, y)   # params and state updated in place (train_step.py)

`update` is plain NumPy, so it runs on arrays and traces into generated code alike; it
returns new arrays and leaves its arguments alone. It is functional as optax's is, but
takes torch.optim's view of what it does: `update(params, grads, state) -> (new params,
new state)` applies the step itself, where optax's `update(grads, state, params) ->
(updates, new state)` leaves `optax.apply_updates(params, updates)` to the caller. A call
in optax's order (the state second) is refused with a TypeError saying the order, rather
than read as params. The formulas are torch.optim's
(written out in each class), with its defaults: `weight_decay` is torch's (added to the
gradient, L2, in SGD, Adam and RMSprop; decoupled, `p *= 1 - lr * wd`, in AdamW), Adam's
bias correction is torch's (`eps` added to sqrt(v_hat), not inside the root), SGD's
momentum buffer starts at the first gradient, and `dampening` is not offered (torch's
default 0). Each state array has its parameter's dtype (float32 stays float32); the step
count is a float64 0-d array. The hyperparameters are attributes: a compiled step reads
them at each call as inputs, so `opt.lr = ...` (a schedule) takes effect with no new trace.
"""

import numpy as np

from .errors import at, where
from .tree import leaves, map_tree


def _unflatten(like, values):
    """`like`'s structure with its leaves replaced by `values`, in leaves() order."""
    it = iter(values)
    return map_tree(like, lambda _: next(it))


def _zeros(params):
    return map_tree(params, lambda p: np.zeros_like(p))


class Optimizer:
    """init(params) -> state; update(params, grads, state) -> (params, state), leaf by leaf
    through `_leaf(p, g, *slots, step, h, f)` -> (p, *slots), with `slots` the state's
    trees, `h` the float hyperparameters (hyper()) and `f` the structural flags (flags()).
    `_leaf` reads no attribute of the optimizer: a compiled step passes h as inputs and f
    as static values (train_step.py: in the key, not read), so nothing it reads is baked
    into the code."""

    slots = ()  # names of the per-parameter state trees
    floats = ("lr",)  # the float hyperparameters, inputs of a compiled step

    def hyper(self):
        return {name: float(getattr(self, name)) for name in self.floats}

    def flags(self):
        return ()

    def init(self, params):
        state = {"step": np.zeros((), np.float64)}
        for name in self.slots:
            state[name] = _zeros(params)
        return state

    def update(self, params, grads, state):
        """(new params, new state): new arrays; the arguments are left as they were.
        The order is (params, grads, state), torch.optim's, not optax's (grads, state,
        params), whose habit is refused by name (`_check_order`)."""
        self._check_order(params, grads, state)
        return self._update(params, grads, state, self.hyper(), self.flags())

    def _check_order(self, params, grads, state):
        """A state is a dict of "step" and this optimizer's slots (what init made); one
        passed where params or grads go is an optax habit, said so rather than failing
        with a KeyError inside."""
        if self._is_state(state):
            return
        place = ("second, where grads go" if self._is_state(grads) else
                 "first, where params go" if self._is_state(params) else None)
        what = f"the state from opt.init(params) came {place}" if place else \
            f"the third argument is a {type(state).__name__}, not the state opt.init(params) made"
        raise TypeError(at(where(), f"{type(self).__name__}.update takes (params, grads, "
                           f"state) and returns (new_params, new_state), torch.optim's order; "
                           f"{what}. optax's order, update(grads, state, params) -> (updates, "
                           "state), is not this one: write params, state = opt.update(params, "
                           "grads, state)"))

    def _is_state(self, tree):
        return type(tree) is dict and "step" in tree and set(tree) <= {"step", *self.slots}

    def _update(self, params, grads, state, h, f, leaf=None):
        """`leaf`: what updates one parameter, `_leaf` unless a compiled step watches each
        call (train_step.py: each is one step of the loop its code keeps)."""
        step = state["step"] + 1.0
        trees = [leaves(state[name]) for name in self.slots]
        leaf = self._leaf if leaf is None else leaf
        new = [leaf(p, g, *slots, step, h, f)
               for p, g, *slots in zip(leaves(params), leaves(grads), *trees)]
        out = {"step": step}
        for i, name in enumerate(self.slots):
            out[name] = _unflatten(state[name], [n[i + 1] for n in new])
        return _unflatten(params, [n[0] for n in new]), out

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class SGD(Optimizer):
    """torch.optim.SGD (dampening 0): g += wd p; with momentum, b = mu b + g (b = g at the
    first step: b starts at 0), g = g + mu b (Nesterov) or b; p -= lr g."""

    floats = ("lr", "momentum", "weight_decay")

    def __init__(self, lr=1e-3, momentum=0.0, nesterov=False, weight_decay=0.0):
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum needs momentum > 0 (as torch.optim.SGD)")
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.nesterov = bool(nesterov)

    @property
    def slots(self):
        return ("momentum_buffer",) if self.momentum else ()

    def flags(self):
        return (bool(self.momentum), self.nesterov, bool(self.weight_decay))

    def _leaf(self, p, g, *rest):
        h, (momentum, nesterov, decay) = rest[-2:]
        if decay:
            g = g + h["weight_decay"] * p
        if not momentum:
            return (p - h["lr"] * g,)
        buf = h["momentum"] * rest[0] + g
        g = g + h["momentum"] * buf if nesterov else buf
        return p - h["lr"] * g, buf


class Adam(Optimizer):
    """torch.optim.Adam: g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g**2;
    p -= (lr / (1 - b1**t)) m / (sqrt(v) / sqrt(1 - b2**t) + eps), t the step (from 1)."""

    slots = ("m", "v")
    floats = ("lr", "beta1", "beta2", "eps", "weight_decay")
    decoupled = False

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.lr, self.eps, self.weight_decay = lr, eps, weight_decay
        self.beta1, self.beta2 = betas

    def flags(self):
        return (bool(self.weight_decay),)

    def _leaf(self, p, g, m, v, step, h, f):
        lr, b1, b2 = h["lr"], h["beta1"], h["beta2"]
        if f[0] and self.decoupled:
            p = p * (1.0 - lr * h["weight_decay"])
        elif f[0]:
            g = g + h["weight_decay"] * p
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        correction1 = (1.0 - b1 ** step).astype(p.dtype)  # float32 stays float32
        root2 = np.sqrt(1.0 - b2 ** step).astype(p.dtype)
        return p - (lr / correction1) * m / (np.sqrt(v) / root2 + h["eps"]), m, v


class AdamW(Adam):
    """torch.optim.AdamW: p *= 1 - lr wd (decoupled weight decay, default 0.01), then
    Adam's update without the L2 term."""

    decoupled = True  # a class attribute, the same for every AdamW: not a setting

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(lr, betas, eps, weight_decay)


class RMSprop(Optimizer):
    """torch.optim.RMSprop: g += wd p; s = a s + (1 - a) g**2; centered: c = a c + (1 - a)
    g, and s - c**2 in place of s; d = sqrt(...) + eps; with momentum b = mu b + g / d,
    p -= lr b; else p -= lr g / d."""

    floats = ("lr", "alpha", "eps", "weight_decay", "momentum")

    def __init__(self, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False):
        self.lr, self.alpha, self.eps, self.weight_decay = lr, alpha, eps, weight_decay
        self.momentum, self.centered = momentum, bool(centered)

    @property
    def slots(self):
        return ("square_avg",) + (("grad_avg",) if self.centered else ()) + \
            (("momentum_buffer",) if self.momentum else ())

    def flags(self):
        return (bool(self.weight_decay), self.centered, bool(self.momentum))

    def _leaf(self, p, g, *rest):
        h, (decay, centered, momentum) = rest[-2:]
        rest = list(rest[:-3])  # the slots (the step count is not used)
        if decay:
            g = g + h["weight_decay"] * p
        a = h["alpha"]
        square = a * rest.pop(0) + (1.0 - a) * (g * g)
        out = [square]
        if centered:
            mean = a * rest.pop(0) + (1.0 - a) * g
            out.append(mean)
            denom = np.sqrt(square - mean * mean) + h["eps"]
        else:
            denom = np.sqrt(square) + h["eps"]
        if momentum:
            buf = h["momentum"] * rest.pop(0) + g / denom
            out.append(buf)
            return (p - h["lr"] * buf, *out)
        return (p - h["lr"] * g / denom, *out)


def compile_step(loss, optimizer, example=None):
    """One generated function doing loss(params, *batch)'s forward, its backward and
    `optimizer`'s update; call it as step(params, state, *batch) (train_step.py).
    `example=`: the loss's example arguments for `autodiffgen emit`, as grad's (a loss
    decorated with @value_and_grad(example=...) gives its own)."""
    from .train_step import TrainStep  # it builds on the compiler; this module does not

    return TrainStep(loss, optimizer, example)
