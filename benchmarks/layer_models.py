"""Layer-style NumPy models, written the way course assignments, tutorials and classic
scripts write them, each with its author's hand-written backward (issue 29).

Such code preallocates outputs and fills them in nested loops, keeps caches in tuples and
dicts, updates arrays in place, selects with boolean masks and fancy indices, scatters with
`np.add.at` and reads Python lists of ints. Every layer here is a `*_forward` returning
`(out, cache)` and a `*_backward` taking the cache, as such code is organised; the loss a
user differentiates and the hand-written forward+backward it is timed against are put
together in benchmarks/layers.py. Nothing here knows autodiffgen: this is the user's code.
"""

import numpy as np


# ---- fully connected layers ---------------------------------------------------------------
def affine_forward(x, w, b):
    """x has shape (N, d_1, ..., d_k): each of its N examples is one row of d_1*...*d_k."""
    rows = x.reshape(x.shape[0], -1)
    out = rows.dot(w) + b
    return out, (x, w, b)


def affine_backward(dout, cache):
    x, w, _ = cache
    dx = dout.dot(w.T).reshape(x.shape)
    dw = x.reshape(x.shape[0], -1).T.dot(dout)
    db = np.sum(dout, axis=0)
    return dx, dw, db


def relu_forward(x):
    out = np.maximum(0, x)
    return out, x


def relu_backward(dout, cache):
    dx = dout.copy()
    dx[cache <= 0] = 0
    return dx


def batchnorm_forward(x, gamma, beta, bn_param):
    """Train mode: normalise with the batch's own mean and variance."""
    eps = bn_param.get("eps", 1e-5)
    mean = x.mean(axis=0)
    centered = x - mean
    var = np.mean(centered ** 2, axis=0)
    std = np.sqrt(var + eps)
    x_hat = centered / std
    out = gamma * x_hat + beta
    cache = {"x_hat": x_hat, "std": std, "gamma": gamma}
    return out, cache


def batchnorm_backward(dout, cache):
    """The gradient through the mean and the variance in one line, as derived on paper."""
    x_hat = cache["x_hat"]
    dbeta = dout.sum(axis=0)
    dgamma = np.sum(dout * x_hat, axis=0)
    dx_hat = dout * cache["gamma"]
    dx = (dx_hat - dx_hat.mean(axis=0) - x_hat * np.mean(dx_hat * x_hat, axis=0)) / cache["std"]
    return dx, dgamma, dbeta


# ---- convolution and pooling, naive: one output element per loop iteration ----------------
def conv_forward_naive(x, w, b, conv_param):
    stride, pad = conv_param["stride"], conv_param["pad"]
    N, _, H, W = x.shape
    F, _, HH, WW = w.shape
    H_out = 1 + (H + 2 * pad - HH) // stride
    W_out = 1 + (W + 2 * pad - WW) // stride
    x_pad = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    out = np.zeros((N, F, H_out, W_out))
    for n in range(N):
        for f in range(F):
            for i in range(H_out):
                for j in range(W_out):
                    top, left = i * stride, j * stride
                    window = x_pad[n, :, top:top + HH, left:left + WW]
                    out[n, f, i, j] = np.sum(window * w[f]) + b[f]
    return out, (x, w, b, conv_param)


def conv_backward_naive(dout, cache):
    x, w, _, conv_param = cache
    stride, pad = conv_param["stride"], conv_param["pad"]
    N, F, H_out, W_out = dout.shape
    _, _, HH, WW = w.shape
    x_pad = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    dx_pad = np.zeros_like(x_pad)
    dw = np.zeros_like(w)
    db = dout.sum(axis=(0, 2, 3))
    for n in range(N):
        for f in range(F):
            for i in range(H_out):
                for j in range(W_out):
                    top, left = i * stride, j * stride
                    g = dout[n, f, i, j]
                    dw[f] += x_pad[n, :, top:top + HH, left:left + WW] * g
                    dx_pad[n, :, top:top + HH, left:left + WW] += w[f] * g
    dx = dx_pad[:, :, pad:pad + x.shape[2], pad:pad + x.shape[3]]
    return dx, dw, db


def max_pool_forward_naive(x, pool_param):
    ph, pw, stride = pool_param["pool_height"], pool_param["pool_width"], pool_param["stride"]
    N, C, H, W = x.shape
    H_out = 1 + (H - ph) // stride
    W_out = 1 + (W - pw) // stride
    out = np.zeros((N, C, H_out, W_out))
    for n in range(N):
        for c in range(C):
            for i in range(H_out):
                for j in range(W_out):
                    window = x[n, c, i * stride:i * stride + ph, j * stride:j * stride + pw]
                    out[n, c, i, j] = np.max(window)
    return out, (x, pool_param)


def max_pool_backward_naive(dout, cache):
    """Each window's gradient goes to its largest entry (the mask of the maximum)."""
    x, pool_param = cache
    ph, pw, stride = pool_param["pool_height"], pool_param["pool_width"], pool_param["stride"]
    N, C, H_out, W_out = dout.shape
    dx = np.zeros_like(x)
    for n in range(N):
        for c in range(C):
            for i in range(H_out):
                for j in range(W_out):
                    rows = slice(i * stride, i * stride + ph)
                    cols = slice(j * stride, j * stride + pw)
                    window = x[n, c, rows, cols]
                    mask = window == np.max(window)
                    dx[n, c, rows, cols] += mask * dout[n, c, i, j]
    return dx


# ---- classifier losses: (loss, cache), then the gradient of the scores ---------------------
def svm_forward(x, y):
    """Multiclass hinge loss with margin 1, averaged over the N rows of scores x."""
    N = x.shape[0]
    correct = x[np.arange(N), y]
    margins = np.maximum(0, x - correct[:, np.newaxis] + 1.0)
    margins[np.arange(N), y] = 0
    loss = np.sum(margins) / N
    return loss, (margins, y)


def svm_backward(cache):
    margins, y = cache
    N = margins.shape[0]
    positive = margins > 0
    dx = np.zeros_like(margins)
    dx[positive] = 1
    dx[np.arange(N), y] -= np.sum(positive, axis=1)
    dx /= N
    return dx


def softmax_forward(x, y):
    probs = np.exp(x - np.max(x, axis=1, keepdims=True))
    probs /= np.sum(probs, axis=1, keepdims=True)
    N = x.shape[0]
    loss = -np.sum(np.log(probs[np.arange(N), y])) / N
    return loss, (probs, y)


def softmax_backward(cache):
    probs, y = cache
    N = probs.shape[0]
    dx = probs.copy()
    dx[np.arange(N), y] -= 1
    dx /= N
    return dx


# ---- recurrent layers ------------------------------------------------------------------------
def rnn_step_forward(x, prev_h, Wx, Wh, b):
    next_h = np.tanh(prev_h.dot(Wh) + x.dot(Wx) + b)
    return next_h, (x, prev_h, Wx, Wh, next_h)


def rnn_step_backward(dnext_h, cache):
    x, prev_h, Wx, Wh, next_h = cache
    draw = dnext_h * (1 - next_h ** 2)
    dx = draw.dot(Wx.T)
    dprev_h = draw.dot(Wh.T)
    dWx = x.T.dot(draw)
    dWh = prev_h.T.dot(draw)
    db = draw.sum(axis=0)
    return dx, dprev_h, dWx, dWh, db


def rnn_forward(x, h0, Wx, Wh, b):
    """x is (N, T, D); the hidden states of every step go into a preallocated (N, T, H)."""
    N, T, _ = x.shape
    h = np.zeros((N, T, h0.shape[1]))
    caches = []
    for t in range(T):
        prev_h = h0 if t == 0 else h[:, t - 1, :]
        h[:, t, :], cache = rnn_step_forward(x[:, t, :], prev_h, Wx, Wh, b)
        caches.append(cache)
    return h, caches


def rnn_backward(dh, caches):
    N, T, H = dh.shape
    D = caches[0][0].shape[1]
    dx = np.zeros((N, T, D))
    dWx, dWh, db = np.zeros((D, H)), np.zeros((H, H)), np.zeros(H)
    dprev_h = np.zeros((N, H))
    for t in reversed(range(T)):
        dx[:, t, :], dprev_h, dWx_t, dWh_t, db_t = rnn_step_backward(dh[:, t, :] + dprev_h,
                                                                     caches[t])
        dWx += dWx_t
        dWh += dWh_t
        db += db_t
    return dx, dprev_h, dWx, dWh, db


def sigmoid(x):
    """A sigmoid that never overflows: exp is only taken of values <= 0."""
    pos_mask = x >= 0
    neg_mask = x < 0
    z = np.zeros_like(x)
    z[pos_mask] = np.exp(-x[pos_mask])
    z[neg_mask] = np.exp(x[neg_mask])
    top = np.ones_like(x)
    top[neg_mask] = z[neg_mask]
    return top / (1 + z)


def lstm_step_forward(x, prev_h, prev_c, Wx, Wh, b):
    """The four gates from one (N, 4H) product: input, forget, output, then the cell's."""
    H = prev_h.shape[1]
    a = x.dot(Wx) + prev_h.dot(Wh) + b
    i = sigmoid(a[:, :H])
    f = sigmoid(a[:, H:2 * H])
    o = sigmoid(a[:, 2 * H:3 * H])
    g = np.tanh(a[:, 3 * H:])
    next_c = f * prev_c + i * g
    tanh_c = np.tanh(next_c)
    next_h = o * tanh_c
    return next_h, next_c, (x, prev_h, prev_c, Wx, Wh, i, f, o, g, tanh_c)


def lstm_step_backward(dnext_h, dnext_c, cache):
    x, prev_h, prev_c, Wx, Wh, i, f, o, g, tanh_c = cache
    dc = dnext_c + dnext_h * o * (1 - tanh_c ** 2)
    di = dc * g * i * (1 - i)
    df = dc * prev_c * f * (1 - f)
    do = dnext_h * tanh_c * o * (1 - o)
    dg = dc * i * (1 - g ** 2)
    da = np.hstack((di, df, do, dg))
    dx = da.dot(Wx.T)
    dprev_h = da.dot(Wh.T)
    dprev_c = dc * f
    return dx, dprev_h, dprev_c, x.T.dot(da), prev_h.T.dot(da), da.sum(axis=0)


def lstm_forward(x, h0, Wx, Wh, b):
    N, T, _ = x.shape
    h = np.zeros((N, T, h0.shape[1]))
    prev_h, prev_c = h0, np.zeros_like(h0)
    caches = []
    for t in range(T):
        prev_h, prev_c, cache = lstm_step_forward(x[:, t, :], prev_h, prev_c, Wx, Wh, b)
        h[:, t, :] = prev_h
        caches.append(cache)
    return h, caches


def lstm_backward(dh, caches):
    N, T, H = dh.shape
    dx = np.zeros((N, T, caches[0][0].shape[1]))
    dWx, dWh, db = (np.zeros_like(caches[0][3]), np.zeros_like(caches[0][4]),
                    np.zeros(4 * H))
    dprev_h, dprev_c = np.zeros((N, H)), np.zeros((N, H))
    for t in range(T - 1, -1, -1):
        dx_t, dprev_h, dprev_c, dWx_t, dWh_t, db_t = lstm_step_backward(
            dh[:, t, :] + dprev_h, dprev_c, caches[t])
        dx[:, t, :] = dx_t
        dWx += dWx_t
        dWh += dWh_t
        db += db_t
    return dx, dprev_h, dWx, dWh, db


# ---- temporal layers: the same weights at every step of an (N, T, ...) sequence ------------
def word_embedding_forward(x, W):
    """x holds word indices (N, T); each becomes its row of W, (N, T, D)."""
    out = W[x]
    return out, (x, W)


def word_embedding_backward(dout, cache):
    x, W = cache
    dW = np.zeros_like(W)
    np.add.at(dW, x, dout)  # a word seen twice gets both gradients
    return dW


def temporal_affine_forward(x, w, b):
    N, T, D = x.shape
    M = b.shape[0]
    out = x.reshape(N * T, D).dot(w).reshape(N, T, M) + b
    return out, (x, w, b)


def temporal_affine_backward(dout, cache):
    x, w, b = cache
    N, T, D = x.shape
    M = b.shape[0]
    dout_flat = dout.reshape(N * T, M)
    dx = dout_flat.dot(w.T).reshape(N, T, D)
    dw = x.reshape(N * T, D).T.dot(dout_flat)
    db = dout_flat.sum(axis=0)
    return dx, dw, db


def temporal_softmax_forward(x, y, mask):
    """Softmax loss at every step of (N, T, V) scores, counted where mask is True, summed
    over the steps and averaged over the N sequences."""
    N, T, V = x.shape
    x_flat = x.reshape(N * T, V)
    y_flat = y.reshape(N * T)
    mask_flat = mask.reshape(N * T)
    probs = np.exp(x_flat - np.max(x_flat, axis=1, keepdims=True))
    probs /= np.sum(probs, axis=1, keepdims=True)
    loss = -np.sum(mask_flat * np.log(probs[np.arange(N * T), y_flat])) / N
    return loss, (probs, y_flat, mask_flat, x.shape)


def temporal_softmax_backward(cache):
    probs, y_flat, mask_flat, shape = cache
    N = shape[0]
    dx_flat = probs.copy()
    dx_flat[np.arange(dx_flat.shape[0]), y_flat] -= 1
    dx_flat /= N
    dx_flat *= mask_flat[:, None]
    return dx_flat.reshape(shape)


# ---- a two-layer net: affine - relu - affine - softmax, L2 on the weights -------------------
def two_layer_forward(params, X, y, reg):
    hidden, fc1_cache = affine_forward(X, params["W1"], params["b1"])
    hidden, relu_cache = relu_forward(hidden)
    scores, fc2_cache = affine_forward(hidden, params["W2"], params["b2"])
    data_loss, softmax_cache = softmax_forward(scores, y)
    reg_loss = 0.5 * reg * (np.sum(params["W1"] ** 2) + np.sum(params["W2"] ** 2))
    return data_loss + reg_loss, (fc1_cache, relu_cache, fc2_cache, softmax_cache)


def two_layer_backward(params, cache, reg):
    fc1_cache, relu_cache, fc2_cache, softmax_cache = cache
    grads = {}
    dscores = softmax_backward(softmax_cache)
    dhidden, grads["W2"], grads["b2"] = affine_backward(dscores, fc2_cache)
    dhidden = relu_backward(dhidden, relu_cache)
    _, grads["W1"], grads["b1"] = affine_backward(dhidden, fc1_cache)
    grads["W1"] += reg * params["W1"]
    grads["W2"] += reg * params["W2"]
    return grads


# ---- character-level models: column vectors, one step per character, dicts by step ---------
def char_rnn_forward(inputs, targets, hprev, Wxh, Whh, Why, bh, by):
    """inputs and targets are Python lists of character indices."""
    vocab_size = Wxh.shape[1]
    xs, hs, ps = {}, {}, {}
    hs[-1] = np.copy(hprev)
    loss = 0
    for t in range(len(inputs)):
        xs[t] = np.zeros((vocab_size, 1))
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t - 1]) + bh)
        scores = np.dot(Why, hs[t]) + by
        ps[t] = np.exp(scores) / np.sum(np.exp(scores))
        loss += -np.log(ps[t][targets[t], 0])
    return loss, (xs, hs, ps)


def char_rnn_backward(cache, targets, Wxh, Whh, Why):
    xs, hs, ps = cache
    dWxh, dWhh, dWhy = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros_like(Why)
    dbh, dby = np.zeros_like(hs[0]), np.zeros_like(ps[0])
    dh_next = np.zeros_like(hs[0])
    for t in reversed(range(len(targets))):
        dy = np.copy(ps[t])
        dy[targets[t]] -= 1
        dWhy += np.dot(dy, hs[t].T)
        dby += dy
        dh = np.dot(Why.T, dy) + dh_next
        dh_raw = (1 - hs[t] * hs[t]) * dh
        dbh += dh_raw
        dWxh += np.dot(dh_raw, xs[t].T)
        dWhh += np.dot(dh_raw, hs[t - 1].T)
        dh_next = np.dot(Whh.T, dh_raw)
    return dWxh, dWhh, dWhy, dbh, dby


def sigmoid_plain(x):
    return 1.0 / (1.0 + np.exp(-x))


def char_lstm_cell(x, h_prev, c_prev, p):
    """One step on z = [h_prev; x]: four weight matrices of shape (H, H + V) in the dict p."""
    z = np.vstack((h_prev, x))
    f = sigmoid_plain(np.dot(p["Wf"], z) + p["bf"])
    i = sigmoid_plain(np.dot(p["Wi"], z) + p["bi"])
    c_bar = np.tanh(np.dot(p["Wc"], z) + p["bc"])
    o = sigmoid_plain(np.dot(p["Wo"], z) + p["bo"])
    c = f * c_prev + i * c_bar
    h = o * np.tanh(c)
    y = np.dot(p["Wy"], h) + p["by"]
    prob = np.exp(y - np.max(y)) / np.sum(np.exp(y - np.max(y)))
    return h, c, prob, (z, f, i, c_bar, o, c)


def char_lstm_forward(inputs, targets, h_prev, c_prev, p):
    vocab_size = p["Wy"].shape[0]
    hs, cs, ps, steps = {-1: np.copy(h_prev)}, {-1: np.copy(c_prev)}, {}, {}
    loss = 0
    for t in range(len(inputs)):
        x = np.zeros((vocab_size, 1))
        x[inputs[t]] = 1
        hs[t], cs[t], ps[t], steps[t] = char_lstm_cell(x, hs[t - 1], cs[t - 1], p)
        loss += -np.log(ps[t][targets[t], 0])
    return loss, (hs, cs, ps, steps)


def char_lstm_backward(cache, targets, p):
    hs, cs, ps, steps = cache
    H = hs[-1].shape[0]
    grads = {k: np.zeros_like(v) for k, v in p.items()}
    dh_next, dc_next = np.zeros_like(hs[0]), np.zeros_like(cs[0])
    for t in reversed(range(len(targets))):
        z, f, i, c_bar, o, c = steps[t]
        dy = np.copy(ps[t])
        dy[targets[t]] -= 1
        grads["Wy"] += np.dot(dy, hs[t].T)
        grads["by"] += dy
        dh = np.dot(p["Wy"].T, dy) + dh_next
        tanh_c = np.tanh(c)
        do = dh * tanh_c * o * (1 - o)
        dc = dc_next + dh * o * (1 - tanh_c ** 2)
        dc_bar = dc * i * (1 - c_bar ** 2)
        di = dc * c_bar * i * (1 - i)
        df = dc * cs[t - 1] * f * (1 - f)
        dz = np.zeros_like(z)
        for gate, dgate in (("f", df), ("i", di), ("c", dc_bar), ("o", do)):
            grads["W" + gate] += np.dot(dgate, z.T)
            grads["b" + gate] += dgate
            dz += np.dot(p["W" + gate].T, dgate)
        dh_next = dz[:H]
        dc_next = f * dc
    return grads


# ---- the losses a user hands to value_and_grad: the forward, composed into a scalar --------
# A layer's loss is sum(out * dout) with a fixed random upstream gradient dout, as a
# gradient check composes it; the loss layers and the nets are scalars already.
def affine_loss(x, w, b, dout):
    out, _ = affine_forward(x, w, b)
    return np.sum(out * dout)


def relu_loss(x, dout):
    out, _ = relu_forward(x)
    return np.sum(out * dout)


def batchnorm_loss(x, gamma, beta, bn_param, dout):
    out, _ = batchnorm_forward(x, gamma, beta, bn_param)
    return np.sum(out * dout)


def conv_loss(x, w, b, conv_param, dout):
    out, _ = conv_forward_naive(x, w, b, conv_param)
    return np.sum(out * dout)


def max_pool_loss(x, pool_param, dout):
    out, _ = max_pool_forward_naive(x, pool_param)
    return np.sum(out * dout)


def svm_loss(x, y):
    return svm_forward(x, y)[0]


def softmax_loss(x, y):
    return softmax_forward(x, y)[0]


def rnn_step_loss(x, prev_h, Wx, Wh, b, dnext_h):
    next_h, _ = rnn_step_forward(x, prev_h, Wx, Wh, b)
    return np.sum(next_h * dnext_h)


def rnn_loss(x, h0, Wx, Wh, b, dh):
    h, _ = rnn_forward(x, h0, Wx, Wh, b)
    return np.sum(h * dh)


def word_embedding_loss(W, x, dout):
    out, _ = word_embedding_forward(x, W)
    return np.sum(out * dout)


def temporal_affine_loss(x, w, b, dout):
    out, _ = temporal_affine_forward(x, w, b)
    return np.sum(out * dout)


def temporal_softmax_loss(x, y, mask):
    return temporal_softmax_forward(x, y, mask)[0]


def lstm_step_loss(x, prev_h, prev_c, Wx, Wh, b, dnext_h, dnext_c):
    next_h, next_c, _ = lstm_step_forward(x, prev_h, prev_c, Wx, Wh, b)
    return np.sum(next_h * dnext_h) + np.sum(next_c * dnext_c)


def lstm_loss(x, h0, Wx, Wh, b, dh):
    h, _ = lstm_forward(x, h0, Wx, Wh, b)
    return np.sum(h * dh)


def two_layer_loss(W1, b1, W2, b2, X, y, reg):
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
    return two_layer_forward(params, X, y, reg)[0]


def char_rnn_loss(Wxh, Whh, Why, bh, by, hprev, inputs, targets):
    return char_rnn_forward(inputs, targets, hprev, Wxh, Whh, Why, bh, by)[0]


CHAR_LSTM_PARAMS = ("Wf", "Wi", "Wc", "Wo", "Wy", "bf", "bi", "bc", "bo", "by")


def char_lstm_loss(Wf, Wi, Wc, Wo, Wy, bf, bi, bc, bo, by, h_prev, c_prev, inputs, targets):
    p = dict(zip(CHAR_LSTM_PARAMS, (Wf, Wi, Wc, Wo, Wy, bf, bi, bc, bo, by)))
    return char_lstm_forward(inputs, targets, h_prev, c_prev, p)[0]
