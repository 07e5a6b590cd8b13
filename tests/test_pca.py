"""dkrp.baselines.pca: PCA projector equal to scikit-learn's PCA up to sign."""

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA

from dkrp.baselines import PCAProjector


def test_pca_matches_sklearn_up_to_sign():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((300, 10)) @ rng.standard_normal((10, 10))
    ours = PCAProjector(n_components=5, random_state=0).fit(X)
    sk = PCA(n_components=5, svd_solver="full").fit(X)
    signs = np.sign(np.sum(ours.components_ * sk.components_, axis=1))
    np.testing.assert_allclose(ours.components_ * signs[:, None], sk.components_, atol=1e-8)
    np.testing.assert_allclose(ours.explained_variance_, sk.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ours.transform(X) * signs, sk.transform(X), atol=1e-8)
    white = PCAProjector(n_components=5, whiten=True, random_state=0).fit(X).transform(X)
    np.testing.assert_allclose(white.var(axis=0, ddof=1), 1.0, rtol=1e-8)
    Xs = sp.csr_matrix(X * (rng.random(X.shape) < 0.3))
    np.testing.assert_allclose(PCAProjector(n_components=5).fit(Xs).components_,
                               PCAProjector(n_components=5).fit(Xs.toarray()).components_,
                               atol=1e-10)
