"""TLS for real (RELIABILITY R16): a scheduler and workers with certificates, `dkrp featurize`
over ``tls://`` with the client's TLS configuration, and a client without certificates refused.

Certificates (a throw-away CA, and one key pair it signs for 127.0.0.1) are generated in the
test with ``cryptography``; nothing leaves the loopback interface.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import free_port, stop_processes

from dkrp import PolynomialRandomProjection
from dkrp.feature_store import open_features

pytestmark = pytest.mark.cluster

REPO_ROOT = Path(__file__).resolve().parents[1]


def _write_certificates(folder: Path) -> dict:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def pem_key(key):
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("dkrp test CA"))
          .issuer_name(name("dkrp test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(pem_key(key))
    paths["key"].chmod(0o600)
    return paths


@pytest.fixture
def tls_cluster(tmp_path):
    """A real `dask scheduler --protocol tls` and two TLS `dask worker` processes."""
    certs = _write_certificates(tmp_path)
    tls = ["--tls-ca-file", str(certs["ca"]), "--tls-cert", str(certs["cert"]),
           "--tls-key", str(certs["key"])]
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    env = {**os.environ, "DKRP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
    logs = [open(tmp_path / f"proc{i}.log", "wb") for i in range(3)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--protocol", "tls",
         "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", "127.0.0.1:0",
         *tls], env=env, stdout=logs[0], stderr=subprocess.STDOUT)]
    client_env = {**env,
                  "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(certs["ca"]),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(certs["cert"]),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(certs["key"])}
    try:
        for i in (1, 2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                 "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--name", f"w{i}",
                 *tls], env=env, stdout=logs[i], stderr=subprocess.STDOUT))
        from distributed import Client
        from distributed.security import Security

        security = Security(tls_ca_file=str(certs["ca"]), tls_client_cert=str(certs["cert"]),
                            tls_client_key=str(certs["key"]), require_encryption=True)
        deadline = time.monotonic() + 90
        while True:
            try:
                with Client(address, security=security, timeout=10) as client:
                    client.wait_for_workers(2, timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield {"address": address, "env": client_env, "port": port}
    finally:
        stop_processes(procs, logs)


def test_featurize_over_tls_is_byte_identical_and_plain_clients_are_refused(tmp_path,
                                                                             tls_cluster):
    X = np.random.default_rng(1).standard_normal((3000, 10))
    np.save(tmp_path / "x.npy", X)
    cmd = [sys.executable, "-m", "dkrp", "featurize", str(tmp_path / "x.npy"),
           str(tmp_path / "f.zarr"), "--n-components", "30", "--n-hyperplanes", "60",
           "--scheduler", tls_cluster["address"], "--quiet"]
    run = subprocess.run(cmd, env=tls_cluster["env"], capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stderr
    krp = PolynomialRandomProjection(n_components=30, n_hyperplanes=60, random_state=0)
    expected = krp.fit(X).transform(X)
    assert open_features(tmp_path / "f.zarr").Z.compute().tobytes() == expected.tobytes()

    # The same command without the client's certificates never reaches the scheduler.
    plain_env = {k: v for k, v in tls_cluster["env"].items() if "__TLS__" not in k}
    plain = subprocess.run(cmd[:5] + [str(tmp_path / "g.zarr")] + cmd[6:], env=plain_env,
                           capture_output=True, text=True, timeout=240)
    assert plain.returncode != 0
    assert not (tmp_path / "g.zarr").exists()

    # A plain-TCP client is refused: nothing speaks unencrypted on the scheduler's port.
    from distributed import Client

    with pytest.raises((OSError, TimeoutError)):
        Client(f"tcp://127.0.0.1:{tls_cluster['port']}", timeout=5)
