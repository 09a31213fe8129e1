"""Optional TLS for the sandbox server, so that kubectl can talk to it.

client-go (and therefore kubectl) does not send a bearer token over plain HTTP, so a
developer who wants ``kubectl get pods`` starts the sandbox with ``--tls``: it makes
a throw-away self-signed certificate for 127.0.0.1/localhost and puts it in the
kubeconfig as the cluster's CA. The Python client works either way. Uses the
``cryptography`` package (a dependency of the portal's PyJWT[crypto]).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from pathlib import Path


def self_signed(host: str) -> tuple[ssl.SSLContext, bytes]:
    """A server SSL context and the PEM certificate clients should trust."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("--tls needs the 'cryptography' package") from exc
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-portal-sandbox")])
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        if host not in ("127.0.0.1", "localhost", "0.0.0.0", ""):
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="gpu-sandbox-tls-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        key_file.chmod(0o600)
        context.load_cert_chain(cert_file, key_file)
    return context, cert_pem
