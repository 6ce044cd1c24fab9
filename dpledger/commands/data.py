"""``dpledger data fetch obd [--dir DIR] [--campaign all|men|women]``: the Open Bandit Dataset
sample as a replay log (:mod:`dpledger.policies.contextual.obd`)."""
from __future__ import annotations

import sys

from dpledger.inputs import check_output_dir


def register(sub) -> None:
    p = sub.add_parser("data", help="fetch a public logged data set for --env replay")
    p.add_argument("action", choices=["fetch"],
                   help="fetch: download, check the sha256, extract and convert")
    p.add_argument("name", choices=["obd"],
                   help="obd: the Open Bandit Dataset sample (Saito et al., arXiv 2008.07146) "
                        "inside the obp 0.4.1 wheel on PyPI (downloaded with pip, not installed)")
    p.add_argument("--dir", default=None,
                   help="folder to write the CSVs and the replay log into (default "
                        "$XDG_CACHE_HOME/dpledger or ~/.cache/dpledger)")
    p.add_argument("--campaign", default="all", choices=["all", "men", "women"],
                   help="which uniform-random campaign to convert to a replay log (default all: "
                        "80 items)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dpledger.policies.contextual import obd
    folder = args.dir if args.dir is not None else obd.default_dir()
    check_output_dir(folder, "--dir")
    info = obd.fetch_obd(folder, args.campaign)
    sys.stdout.write(
        f"obp {obd.OBP_VERSION} wheel sha256 {info['wheel_sha256']} (pinned: ok); extracted "
        f"{info['extracted']} CSV files\n"
        f"campaign random/{info['campaign']}: {info['rows']} rows, {info['items']} items, "
        f"{info['clicks']} clicks, propensities {info['propensities']}, {info['context_dim']} "
        "one-hot user-feature columns (norm 1)\n"
        f"wrote {info['log']}\n"
        f"run it: dpledger run linucb --env replay --log {info['log']} --arms "
        f"{info['max_item'] + 1} --runs 10\n")
    return 0
