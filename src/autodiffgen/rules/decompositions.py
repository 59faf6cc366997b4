"""np.linalg: inv, det, slogdet, solve, cholesky, eigh, pinv, norm."""
