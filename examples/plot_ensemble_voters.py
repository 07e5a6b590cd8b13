"""
An ensemble's accuracy against the number of voters
===================================================

:class:`dkrp.RandomFeatureVotingClassifier` trains ``n_voters`` linear SVMs, each on its
own random Fourier feature map, and takes their majority vote (Rost & Zast 2023). A voter's
seeds depend only on the ensemble seed and its index, so the ensemble of n voters is the
first n voters of any larger one with the same seed.

Here on scikit-learn's digits: 40 random Fourier features per voter, 1,000 training rows,
tested on the other 797, without a cluster (the voters train in this process). The grey
points are the voters of the largest ensemble scored alone.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import dkrp

X, y = load_digits(return_X_y=True)
X = X / 8.0 - 1.0  # pixels 0..16 to [-1, 1]
order = np.random.default_rng(0).permutation(len(X))
train, test = order[:1000], order[1000:]

voters = [1, 3, 5, 9, 15, 25]
accuracy = []
for n_voters in voters:
    ensemble = dkrp.RandomFeatureVotingClassifier(n_voters=n_voters, n_components=40,
                                                  gamma=0.02, random_state=0)
    ensemble.fit(X[train], y[train])
    accuracy.append(ensemble.score(X[test], y[test]))
    print(f"{n_voters:2d} voters: test accuracy {accuracy[-1]:.4f}")

# each voter of the last (largest) ensemble is a pipeline: its feature map, its linear SVM
alone = [voter.score(X[test], y[test]) for voter in ensemble.estimators_]
print(f"single voters: {min(alone):.4f} to {max(alone):.4f}")

# %%
# The vote against the voters it is made of:

fig, ax = plt.subplots(figsize=(6.4, 4.2))
ax.plot(voters, 100 * np.array(accuracy), "o-", label="majority vote of n voters")
ax.plot(np.arange(1, len(alone) + 1), 100 * np.array(alone), "o", color="grey", alpha=0.6,
        label=f"voter i alone (of the {voters[-1]})")
ax.set(xlabel="n voters (voter index for the grey points)", ylabel="test accuracy (%)",
       title="40 random Fourier features per voter, digits")
ax.set_ylim(top=ax.get_ylim()[1] + 1.5)  # room for the legend above the curve
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
