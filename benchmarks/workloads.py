"""The benchmark workloads: each a loss written once in plain array code, a hand-written
NumPy forward+backward baseline, and the same math for PyTorch.

A loss is written against an array module `xp` (`numpy` for autodiffgen, `autograd.numpy`
for HIPS autograd, `jax.numpy` for JAX), so every NumPy-style contender differentiates
literally the same code. The forward computation of each baseline is written the same way
as the loss (the same matmuls and einsums, in the same shapes); its craft is in the
backward pass: intermediates of the forward are reused, buffers are updated in place, and
batch reductions are single matmuls.

Each workload has a "full" size (the benchmark) and a "tiny" size (tests/api/test_benchmarks.py
checks that autodiffgen's gradient equals the hand-written one, so the baselines stay
correct).
"""

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Workload:
    name: str                    # the key for --only
    title: str                   # one line: what is measured
    make_loss: Callable          # xp -> loss(*args), the function every NumPy-style peer uses
    by_hand: Callable            # *args -> (value, gradients tuple), hand-written NumPy
    torch_loss: Callable         # (torch, *tensors) -> loss tensor, the same math
    make_args: Callable          # (rng, **size) -> tuple of arguments
    argnums: tuple               # which arguments are differentiated
    sizes: dict = field(default_factory=dict)   # "full" and "tiny": keyword sizes
    rtol: float = 1e-9           # gradient agreement, relative to each gradient's scale
    python_floats: bool = False  # arguments are Python floats, not arrays
    extras: dict = field(default_factory=dict)  # more hand-written versions, name -> function
    jax_loss: Callable = None    # (jnp, jax) -> loss: JAX's own form (lax.scan), else make_loss


def allclose(a, b, rtol):
    """Agreement of two gradients (or values), with an absolute tolerance relative to the
    larger magnitude in `b`: float32 sums of many terms are not exact elementwise."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return bool(np.allclose(a, b, rtol=rtol, atol=rtol * scale + 1e-30))


# ---- 1. a scalar function of two Python floats ------------------------------------------
def scalar_loss(xp):
    def scalar(x1, x2):
        return xp.log(x1) + x1 * x2 - xp.sin(x2)
    return scalar


def scalar_by_hand(x1, x2):
    value = np.log(x1) + x1 * x2 - np.sin(x2)
    return value, (1.0 / x1 + x2, x1 - np.cos(x2))


def scalar_by_hand_math(x1, x2):
    """What a skilled person writes for Python floats: the math module, not NumPy."""
    value = math.log(x1) + x1 * x2 - math.sin(x2)
    return value, (1.0 / x1 + x2, x1 - math.cos(x2))


def scalar_torch(torch, x1, x2):
    return torch.log(x1) + x1 * x2 - torch.sin(x2)


def scalar_args(rng):
    return 2.0, 5.0


# ---- 2. MLP 784-256-256-10, relu, softmax cross-entropy with int labels -----------------
def mlp_loss(xp):
    def mlp(W1, b1, W2, b2, W3, b3, x, y):
        h1 = xp.maximum(x @ W1 + b1, 0.0)
        h2 = xp.maximum(h1 @ W2 + b2, 0.0)
        logits = h2 @ W3 + b3
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        return -log_probs[xp.arange(len(y)), y].mean()
    return mlp


def mlp_by_hand(W1, b1, W2, b2, W3, b3, x, y):
    n, rows = len(y), np.arange(len(y))
    h1 = x @ W1
    h1 += b1
    np.maximum(h1, 0.0, out=h1)
    h2 = h1 @ W2
    h2 += b2
    np.maximum(h2, 0.0, out=h2)
    z = h2 @ W3
    z += b3
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    s = p.sum(axis=1, keepdims=True)
    value = (np.log(s).sum() - z[rows, y].sum()) / n
    del z
    # d loss / d logits = (softmax - onehot) / n, built in p
    p /= s
    p[rows, y] -= 1.0
    p *= 1.0 / n
    gW3, gb3 = h2.T @ p, p.sum(axis=0)
    d2 = p @ W3.T
    del p
    d2 *= h2 > 0
    del h2
    gW2, gb2 = h1.T @ d2, d2.sum(axis=0)
    d1 = d2 @ W2.T
    del d2
    d1 *= h1 > 0
    del h1
    gW1, gb1 = x.T @ d1, d1.sum(axis=0)
    return value, (gW1, gb1, gW2, gb2, gW3, gb3)


def mlp_torch(torch, W1, b1, W2, b2, W3, b3, x, y):
    h1 = torch.relu(x @ W1 + b1)
    h2 = torch.relu(h1 @ W2 + b2)
    logits = h2 @ W3 + b3
    return torch.nn.functional.cross_entropy(logits, y)


def mlp_args(rng, batch=128, sizes=(784, 256, 256, 10)):
    args = []
    for n_in, n_out in itertools.pairwise(sizes):
        args.append((rng.normal(size=(n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
        args.append((rng.normal(size=n_out) * 0.1).astype(np.float32))
    x = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    return (*args, x, y)


# ---- 3. tanh RNN unrolled over T steps, loss on the final state --------------------------
def rnn_loss(xp):
    def rnn(Wx, Wh, b, xs, h0, target):
        xw = xs @ Wx + b                  # (T, B, H): the input projections of every step
        h = h0
        for t in range(xs.shape[0]):
            h = xp.tanh(xw[t] + h @ Wh)
        d = h - target
        return 0.5 * (d * d).sum() / xs.shape[1]
    return rnn


def rnn_by_hand(Wx, Wh, b, xs, h0, target):
    T, B, _ = xs.shape
    H = Wh.shape[0]
    xw = xs @ Wx
    xw += b
    hs = np.empty((T + 1, B, H), dtype=xw.dtype)  # every state, for the backward pass
    hs[0] = h0
    for t in range(T):
        pre = hs[t] @ Wh
        pre += xw[t]
        np.tanh(pre, out=hs[t + 1])
    d = hs[T] - target
    value = 0.5 * (d * d).sum() / B
    dpre = np.empty_like(xw)                     # d loss / d (pre-activation) of every step
    dh = d
    dh *= 1.0 / B
    WhT = Wh.T
    for t in range(T - 1, -1, -1):
        h = hs[t + 1]
        dp = dpre[t]
        np.multiply(h, h, out=dp)
        np.subtract(1.0, dp, out=dp)
        dp *= dh
        dh = dp @ WhT
    flat = dpre.reshape(T * B, H)
    gWh = hs[:T].reshape(T * B, H).T @ flat
    gWx = xs.reshape(T * B, -1).T @ flat
    return value, (gWx, gWh, flat.sum(axis=0))


def rnn_torch(torch, Wx, Wh, b, xs, h0, target):
    xw = xs @ Wx + b
    h = h0
    for t in range(xs.shape[0]):
        h = torch.tanh(xw[t] + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[1]


def rnn_args(rng, steps=120, batch=16, inputs=32, hidden=64):
    f32 = np.float32
    Wx = (rng.normal(size=(inputs, hidden)) / np.sqrt(inputs)).astype(f32)
    Wh = (rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)).astype(f32)
    b = (rng.normal(size=hidden) * 0.1).astype(f32)
    xs = rng.normal(size=(steps, batch, inputs)).astype(f32)
    h0 = np.zeros((batch, hidden), dtype=f32)
    target = rng.uniform(-0.5, 0.5, size=(batch, hidden)).astype(f32)
    return Wx, Wh, b, xs, h0, target


# ---- 4. a 17-op elementwise chain ending in a sum -----------------------------------------
def chain_loss(xp):
    def chain(x, y):
        a = xp.sin(x)        # 1
        b = a * y            # 2
        c = xp.exp(b)        # 3
        d = c + x            # 4
        e = xp.tanh(d)       # 5
        f = e * e            # 6
        g = f + 1.0          # 7
        h = xp.log(g)        # 8
        i = h * x            # 9
        j = xp.cos(i)        # 10
        k = j - y            # 11
        m = xp.sqrt(g)       # 12
        n = k * m            # 13
        o = xp.tanh(n)       # 14
        p = o * 0.5          # 15
        q = p + n            # 16
        return q.sum()       # 17
    return chain


def chain_by_hand(x, y):
    # forward, keeping what the backward needs
    a = np.sin(x)
    c = a * y
    np.exp(c, out=c)
    e = c + x
    np.tanh(e, out=e)
    g = e * e
    g += 1.0
    h = np.log(g)
    i = h * x
    k = np.cos(i)
    k -= y
    m = np.sqrt(g)
    n = k * m
    o = np.tanh(n)
    value = 0.5 * o.sum() + n.sum()
    del n
    # backward: dn = 1 + 0.5 (1 - o^2) = 1.5 - 0.5 o^2
    dn = o
    dn *= o
    dn *= -0.5
    dn += 1.5
    gy = dn * m                    # dk
    dn *= k                        # dm
    dg = dn
    dg /= m
    dg *= 0.5                      # dg from sqrt
    s = np.sin(i, out=i)           # di = -sin(i) dk
    s *= gy
    gx = s * h
    np.negative(gx, out=gx)        # dx from i = h x
    s *= x
    s /= g
    dg -= s                        # dg from log: dh / g, dh = di x
    dd = np.multiply(e, dg, out=e)  # dd = 2 e (1 - e^2) dg, and 1 - e^2 = 2 - g
    dd *= 2.0
    dd *= np.subtract(2.0, g, out=g)
    gx += dd                       # dx from d = c + x
    dd *= c                        # db = dd c
    np.negative(gy, out=gy)        # dy from k = j - y
    a *= dd
    gy += a                        # dy from b = a y
    dd *= y
    dd *= np.cos(x, out=a)
    gx += dd                       # dx from a = sin x
    return value, (gx, gy)


def chain_torch(torch, x, y):
    a = torch.sin(x)
    b = a * y
    c = torch.exp(b)
    d = c + x
    e = torch.tanh(d)
    f = e * e
    g = f + 1.0
    h = torch.log(g)
    i = h * x
    j = torch.cos(i)
    k = j - y
    m = torch.sqrt(g)
    n = k * m
    o = torch.tanh(n)
    p = o * 0.5
    q = p + n
    return q.sum()


def chain_args(rng, n=1_000_000):
    x = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    y = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    return x, y


# ---- 5. L2-regularized logistic regression ------------------------------------------------
LAM = 1e-3


def logreg_loss(xp):
    def logreg(w, b, X, y):
        z = X @ w + b
        return (xp.logaddexp(0.0, z) - y * z).mean() + 0.5 * LAM * (w * w).sum()
    return logreg


def logreg_by_hand(w, b, X, y):
    n = len(y)
    z = X @ w
    z += b
    sp = np.logaddexp(0.0, z)
    value = (sp.sum() - y @ z) / n + 0.5 * LAM * (w @ w)
    r = np.subtract(z, sp, out=sp)   # log sigmoid(z)
    np.exp(r, out=r)                 # sigmoid(z)
    r -= y
    r *= 1.0 / n
    gw = X.T @ r
    gw += LAM * w
    return value, (gw, r.sum())


def logreg_torch(torch, w, b, X, y):
    z = X @ w + b
    return (torch.logaddexp(torch.zeros((), dtype=z.dtype), z) - y * z).mean() \
        + 0.5 * LAM * (w * w).sum()


def logreg_args(rng, n=20000, d=100):
    X = rng.normal(size=(n, d))
    w_true = rng.normal(size=d) / np.sqrt(d)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(X @ w_true)))).astype(np.float64)
    w = rng.normal(size=d) * 0.01
    return w, np.array(0.1), X, y


# ---- 6. 2-D convolution through np.einsum on extracted patches ---------------------------
# Padding 1, stride 1: the 9 shifted views of the padded images stacked into a patch
# array (B, C, 9, H, W), contracted with the kernel (O, C, 9) by one einsum. The images
# are not differentiated, so the patches are forward-only work in every contender.
def conv_loss(xp):
    def conv(W, b, x, target):
        B, C, H, Wd = x.shape
        xpad = xp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        patches = xp.stack([xpad[:, :, i:i + H, j:j + Wd] for i in range(3) for j in range(3)],
                           axis=2)
        out = xp.einsum("bckhw,ock->bohw", patches, W.reshape(W.shape[0], C, 9))
        d = out + b[:, None, None] - target
        return 0.5 * (d * d).sum() / B
    return conv


def conv_by_hand(W, b, x, target):
    B, C, H, Wd = x.shape
    O = W.shape[0]
    xpad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.stack([xpad[:, :, i:i + H, j:j + Wd] for i in range(3) for j in range(3)],
                       axis=2)
    del xpad
    d = np.einsum("bckhw,ock->bohw", patches, W.reshape(O, C, 9))
    d += b[:, None, None]
    d -= target
    value = 0.5 * (d * d).sum() / B
    d *= 1.0 / B                                   # d loss / d out
    gW = np.einsum("bckhw,bohw->ock", patches, d).reshape(W.shape)
    return value, (gW, d.sum(axis=(0, 2, 3)))


def conv_torch(torch, W, b, x, target):
    B, C, H, Wd = x.shape
    xpad = torch.nn.functional.pad(x, (1, 1, 1, 1))
    patches = torch.stack([xpad[:, :, i:i + H, j:j + Wd] for i in range(3) for j in range(3)],
                          dim=2)
    out = torch.einsum("bckhw,ock->bohw", patches, W.reshape(W.shape[0], C, 9))
    d = out + b[:, None, None] - target
    return 0.5 * (d * d).sum() / B


def conv_args(rng, batch=8, c_in=16, c_out=32, size=16):
    f32 = np.float32
    W = (rng.normal(size=(c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(f32)
    b = (rng.normal(size=c_out) * 0.1).astype(f32)
    x = rng.normal(size=(batch, c_in, size, size)).astype(f32)
    target = rng.normal(size=(batch, c_out, size, size)).astype(f32)
    return W, b, x, target


# ---- 7. single-head attention block ------------------------------------------------------
def attention_loss(xp):
    def attention(Wq, Wk, Wv, Wo, x, target):
        q, k, v = x @ Wq, x @ Wk, x @ Wv
        s = (q @ xp.swapaxes(k, 1, 2)) * (1.0 / math.sqrt(Wq.shape[1]))
        s = s - s.max(axis=2, keepdims=True)
        e = xp.exp(s)
        p = e / e.sum(axis=2, keepdims=True)
        d = (p @ v) @ Wo - target
        return 0.5 * (d * d).sum() / x.shape[0]
    return attention


def attention_by_hand(Wq, Wk, Wv, Wo, x, target):
    B, S, _ = x.shape
    scale = 1.0 / math.sqrt(Wq.shape[1])
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    p = q @ np.swapaxes(k, 1, 2)
    p *= scale
    p -= p.max(axis=2, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=2, keepdims=True)
    a = p @ v
    d = a @ Wo
    d -= target
    value = 0.5 * (d * d).sum() / B
    d *= 1.0 / B                                   # d loss / d output
    flat = (B * S, -1)
    x2 = x.reshape(flat)
    gWo = a.reshape(flat).T @ d.reshape(flat)
    del a
    da = d @ Wo.T
    del d
    gWv = x2.T @ (np.swapaxes(p, 1, 2) @ da).reshape(flat)
    ds = da @ np.swapaxes(v, 1, 2)                 # d loss / d p, then through the softmax
    del da
    ds -= (ds * p).sum(axis=2, keepdims=True)
    ds *= p
    ds *= scale
    del p
    gWq = x2.T @ (ds @ k).reshape(flat)
    gWk = x2.T @ (np.swapaxes(ds, 1, 2) @ q).reshape(flat)
    return value, (gWq, gWk, gWv, gWo)


def attention_torch(torch, Wq, Wk, Wv, Wo, x, target):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    s = (q @ k.transpose(1, 2)) * (1.0 / math.sqrt(Wq.shape[1]))
    s = s - s.max(dim=2, keepdim=True).values
    e = torch.exp(s)
    p = e / e.sum(dim=2, keepdim=True)
    d = (p @ v) @ Wo - target
    return 0.5 * (d * d).sum() / x.shape[0]


def attention_args(rng, batch=8, seq=64, dim=64):
    f32 = np.float32
    Ws = [(rng.normal(size=(dim, dim)) / np.sqrt(dim)).astype(f32) for _ in range(4)]
    x = rng.normal(size=(batch, seq, dim)).astype(f32)
    target = rng.normal(size=(batch, seq, dim)).astype(f32)
    return (*Ws, x, target)


# ---- 8. GRU unrolled over T steps, loss on the final state -------------------------------
# Gates z (update) and r (reset) from one fused (H, 2H) weight, the candidate n from (H, H);
# the input projections of all steps (and the three biases) as one matmul up front.
def _sigmoid(xp, a):
    return 1.0 / (1.0 + xp.exp(-a))


def gru_loss(xp):
    def gru(Wx, Wzr, Wn, b, xs, h0, target):
        H = Wn.shape[0]
        xw = xs @ Wx + b                  # (T, B, 3H): the input projections of every step
        h = h0
        for t in range(xs.shape[0]):
            zr = _sigmoid(xp, xw[t, :, :2 * H] + h @ Wzr)
            z, r = zr[:, :H], zr[:, H:]
            n = xp.tanh(xw[t, :, 2 * H:] + (r * h) @ Wn)
            h = n + z * (h - n)
        d = h - target
        return 0.5 * (d * d).sum() / xs.shape[1]
    return gru


def gru_by_hand(Wx, Wzr, Wn, b, xs, h0, target):
    T, B, _ = xs.shape
    H = Wn.shape[0]
    xw = xs @ Wx
    xw += b
    dt = xw.dtype
    # what the backward reads, every step's in one preallocated stack
    hs = np.empty((T + 1, B, H), dtype=dt)
    zrs = np.empty((T, B, 2 * H), dtype=dt)
    ns = np.empty((T, B, H), dtype=dt)
    rhs = np.empty((T, B, H), dtype=dt)
    hs[0] = h0
    for t in range(T):
        h, zr, n, rh = hs[t], zrs[t], ns[t], rhs[t]
        np.matmul(h, Wzr, out=zr)
        zr += xw[t, :, :2 * H]
        np.negative(zr, out=zr)          # sigmoid in place
        np.exp(zr, out=zr)
        zr += 1.0
        np.reciprocal(zr, out=zr)
        np.multiply(zr[:, H:], h, out=rh)
        np.matmul(rh, Wn, out=n)
        n += xw[t, :, 2 * H:]
        np.tanh(n, out=n)
        hn = hs[t + 1]                   # h' = n + z (h - n)
        np.subtract(h, n, out=hn)
        hn *= zr[:, :H]
        hn += n
    del xw
    d = hs[T] - target
    value = 0.5 * (d * d).sum() / B
    dh = d
    dh *= 1.0 / B
    # d loss / d (pre-activations) of every step: the gates' and the candidate's
    dzrs = np.empty_like(zrs)
    dns = np.empty_like(ns)
    dh_prev = np.empty_like(dh)
    tmp = np.empty_like(dh)
    tmp2 = np.empty((B, 2 * H), dtype=dt)
    WzrT, WnT = Wzr.T, Wn.T
    for t in range(T - 1, -1, -1):
        h, zr, n = hs[t], zrs[t], ns[t]
        dzr, dn = dzrs[t], dns[t]
        np.subtract(h, n, out=dzr[:, :H])         # dz = dh (h - n)
        dzr[:, :H] *= dh
        np.multiply(dh, zr[:, :H], out=dh_prev)   # dh through z h
        np.subtract(dh, dh_prev, out=dn)          # dn = dh (1 - z)
        np.multiply(n, n, out=tmp)                # through tanh: (1 - n^2)
        np.subtract(1.0, tmp, out=tmp)
        dn *= tmp
        np.matmul(dn, WnT, out=tmp)               # d (r h)
        np.multiply(tmp, h, out=dzr[:, H:])       # dr
        tmp *= zr[:, H:]
        dh_prev += tmp
        np.subtract(1.0, zr, out=tmp2)            # through the sigmoid: zr (1 - zr)
        tmp2 *= zr
        dzr *= tmp2
        np.matmul(dzr, WzrT, out=tmp)
        dh_prev += tmp
        dh, dh_prev = dh_prev, dh
    TB = T * B
    dzr2, dn2 = dzrs.reshape(TB, 2 * H), dns.reshape(TB, H)
    gWzr = hs[:T].reshape(TB, H).T @ dzr2
    gWn = rhs.reshape(TB, H).T @ dn2
    x2T = xs.reshape(TB, -1).T
    gWx = np.concatenate([x2T @ dzr2, x2T @ dn2], axis=1)
    gb = np.concatenate([dzr2.sum(axis=0), dn2.sum(axis=0)])
    return value, (gWx, gWzr, gWn, gb)


def gru_torch(torch, Wx, Wzr, Wn, b, xs, h0, target):
    H = Wn.shape[0]
    xw = xs @ Wx + b
    h = h0
    for t in range(xs.shape[0]):
        zr = torch.sigmoid(xw[t, :, :2 * H] + h @ Wzr)
        z, r = zr[:, :H], zr[:, H:]
        n = torch.tanh(xw[t, :, 2 * H:] + (r * h) @ Wn)
        h = n + z * (h - n)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[1]


def gru_jax(jnp, jax):
    """The GRU as a JAX user writes it: the loop as `lax.scan` (one compiled step)."""
    def gru(Wx, Wzr, Wn, b, xs, h0, target):
        H = Wn.shape[0]
        xw = xs @ Wx + b

        def step(h, xw_t):
            zr = jax.nn.sigmoid(xw_t[:, :2 * H] + h @ Wzr)
            z, r = zr[:, :H], zr[:, H:]
            n = jnp.tanh(xw_t[:, 2 * H:] + (r * h) @ Wn)
            return n + z * (h - n), None
        h, _ = jax.lax.scan(step, h0, xw)
        d = h - target
        return 0.5 * (d * d).sum() / xs.shape[1]
    return gru


def rnn_jax(jnp, jax):
    """The tanh RNN as a JAX user writes it: the loop as `lax.scan`."""
    def rnn(Wx, Wh, b, xs, h0, target):
        xw = xs @ Wx + b
        h, _ = jax.lax.scan(lambda h, xw_t: (jnp.tanh(xw_t + h @ Wh), None), h0, xw)
        d = h - target
        return 0.5 * (d * d).sum() / xs.shape[1]
    return rnn


def gru_args(rng, steps=120, batch=32, inputs=64, hidden=128):
    f32 = np.float32
    Wx = (rng.normal(size=(inputs, 3 * hidden)) / np.sqrt(inputs)).astype(f32)
    Wzr = (rng.normal(size=(hidden, 2 * hidden)) / np.sqrt(hidden)).astype(f32)
    Wn = (rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)).astype(f32)
    b = (rng.normal(size=3 * hidden) * 0.1).astype(f32)
    xs = rng.normal(size=(steps, batch, inputs)).astype(f32)
    h0 = np.zeros((batch, hidden), dtype=f32)
    target = rng.uniform(-0.5, 0.5, size=(batch, hidden)).astype(f32)
    return Wx, Wzr, Wn, b, xs, h0, target


F32, F64 = 2e-4, 1e-9

WORKLOADS = [
    Workload("scalar", "f(x1, x2) = log x1 + x1*x2 - sin x2, Python floats",
             scalar_loss, scalar_by_hand, scalar_torch, scalar_args, (0, 1),
             {"full": {}, "tiny": {}}, F64, python_floats=True,
             extras={"hand-written, math module": scalar_by_hand_math}),
    Workload("mlp", "MLP 784-256-256-10, batch 128, relu, softmax cross-entropy, float32",
             mlp_loss, mlp_by_hand, mlp_torch, mlp_args, (0, 1, 2, 3, 4, 5),
             {"full": {}, "tiny": {"batch": 8, "sizes": (12, 7, 5, 4)}}, F32),
    Workload("rnn", "tanh RNN, 120 steps, hidden 64, input 32, batch 16, float32",
             rnn_loss, rnn_by_hand, rnn_torch, rnn_args, (0, 1, 2),
             {"full": {}, "tiny": {"steps": 5, "batch": 3, "inputs": 4, "hidden": 6}}, F32,
             jax_loss=rnn_jax),
    Workload("chain", "17-op elementwise chain on 1e6 float32, ending in a sum",
             chain_loss, chain_by_hand, chain_torch, chain_args, (0, 1),
             {"full": {}, "tiny": {"n": 50}}, F32),
    Workload("logreg", "L2-regularized logistic regression, 20000x100, float64",
             logreg_loss, logreg_by_hand, logreg_torch, logreg_args, (0, 1),
             {"full": {}, "tiny": {"n": 40, "d": 5}}, F64),
    Workload("conv", "3x3 conv by np.einsum on patches, batch 8, 16->32 ch, 16x16, float32",
             conv_loss, conv_by_hand, conv_torch, conv_args, (0, 1),
             {"full": {}, "tiny": {"batch": 2, "c_in": 3, "c_out": 4, "size": 5}}, F32),
    Workload("attention", "single-head attention, batch 8, seq 64, dim 64, float32",
             attention_loss, attention_by_hand, attention_torch, attention_args, (0, 1, 2, 3),
             {"full": {}, "tiny": {"batch": 2, "seq": 5, "dim": 4}}, F32),
    Workload("gru", "GRU, 120 steps, hidden 128, input 64, batch 32, float32",
             gru_loss, gru_by_hand, gru_torch, gru_args, (0, 1, 2, 3),
             {"full": {}, "tiny": {"steps": 5, "batch": 3, "inputs": 4, "hidden": 6}}, F32,
             jax_loss=gru_jax),
]
