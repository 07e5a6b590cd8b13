"""Issue 30, w8a: KRP (Table 10's k=2000, p=446, t=1, Gaussian) scored on its training rows and
on the held-out part, as the classification experiment fits it (standardised features,
PrimalLinearSVC)."""

import json
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, f1_score
from sklearn.preprocessing import StandardScaler

from dkrp.experiments._data import load_split
from dkrp.experiments._maps import make_map
from dkrp.linear_svm import PrimalLinearSVC

split = load_split("w8a")
Xtr, ytr, Xte, yte = split.X_train, split.y_train, split.X_test, split.y_test
rows = []
for method, k, p, t in (("krp-gaussian", 2000, 446, 1), ("krp-gaussian", 1500, 446, 10)):
    proj = make_map(method, degree=2, k=k, p=p, t=t, seed=0).fit(Xtr)
    Ztr = proj.transform(Xtr)
    Zte = proj.transform(Xte)
    sc = StandardScaler().fit(Ztr)
    Ztr = sc.transform(Ztr).astype(np.float32)
    Zte = sc.transform(Zte).astype(np.float32)
    for C in (0.001, 0.01, 0.1):
        t0 = time.perf_counter()
        m = PrimalLinearSVC(C=C).fit(Ztr, ytr)
        fit = time.perf_counter() - t0
        out = {"method": method, "k": k, "p": p, "t": t, "C": C, "fit_s": round(fit, 1)}
        for where, (A, b) in {"train": (Ztr, ytr), "held_out": (Zte, yte)}.items():
            pr = m.predict(A)
            out[f"{where}_f1"] = round(f1_score(b, pr, pos_label=1), 4)
            out[f"{where}_acc"] = round(100 * accuracy_score(b, pr), 2)
        rows.append(out)
        print(json.dumps(out), flush=True)
json.dump(rows, open(Path(__file__).with_name("krp_train_vs_held_out.json"), "w"), indent=1)
