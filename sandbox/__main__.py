"""Command line: ``python -m sandbox serve --profile PROFILE [options]``.

Starts the sandbox cluster (a simulator, never a real cluster), writes a kubeconfig
the official client and kubectl can use, and serves until interrupted. State is
saved every few seconds and on shutdown, and reloaded at the next start unless
``--reset`` is given.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from portal.cluster_profile import ProfileError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox",
        description="Sandbox cluster: an emulated Kubernetes API with simulated GPUs (for development and tests only).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the sandbox cluster")
    serve.add_argument("--profile", required=True, help="cluster profile YAML (e.g. deploy/cluster-profiles/demo.yaml)")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--state", default="var/sandbox/state.json", help="state file (saved and reloaded)")
    serve.add_argument("--kubeconfig", default="var/sandbox/kubeconfig", help="where to write the kubeconfig")
    serve.add_argument(
        "--crd-dir",
        default=None,
        help="folder scanned for CRDs to validate custom resources (default: the schemas shipped in sandbox/crds/)",
    )
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument("--reset", action="store_true", help="start from a clean state")
    serve.add_argument("--tick", type=float, default=0.5, help="controller loop interval in seconds")
    serve.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with a self-signed certificate (kubectl sends tokens only over TLS)",
    )
    serve.add_argument("--log-level", default="INFO")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from sandbox.cluster import Sandbox

    crd_dir = args.crd_dir
    if crd_dir and not Path(crd_dir).is_dir():
        logging.getLogger("sandbox").warning("sandbox: --crd-dir %s does not exist", crd_dir)
        crd_dir = None
    try:
        sandbox = Sandbox(args.profile, crd_dir=crd_dir, seed=args.seed, state_path=args.state, reset=args.reset)
    except ProfileError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 2
    url = sandbox.serve(args.host, args.port, args.tick, tls=args.tls)
    kubeconfig = sandbox.write_kubeconfig(args.kubeconfig)
    logging.getLogger("sandbox").info("sandbox cluster (simulator) serving at %s; kubeconfig %s", url, kubeconfig)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    sandbox.close()
    logging.getLogger("sandbox").info("sandbox: stopped; state saved to %s", args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
