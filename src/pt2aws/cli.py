"""``pt2aws`` command line: ``env``, ``recommend``, ``train``, ``run``, ``serve``, ``cleanup``.

Examples (a user error prints one line and exits 2; --debug shows the traceback)::

    pt2aws env --profile full
    pt2aws recommend --model roberta-base --examples 1000000 --epochs 3   # what notebook 00 prints
    pt2aws recommend --profile full --aws-target emulator                 # + launch plan, emulated
    pt2aws train --profile smoke --output_dir runs/x/train     # same flags as python -m pt2aws.train
    pt2aws run --profile local                                 # what `make run` does
    pt2aws serve runs/x/deploy/model.tar.gz --port 8080       # local SageMaker endpoint (Ctrl-C stops)
    pt2aws cleanup --prefix pt2aws- --region us-east-1 --yes   # delete leftover SageMaker resources
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from pt2aws.config import PROFILES
from pt2aws.errors import ArgumentParser, MissingFileError, UserError, run_cli
from pt2aws.sizing.workload import PRECISIONS

VERBS = ("env", "recommend", "train", "run", "serve", "cleanup")


def _number(kind: type, ok, requirement: str):
    """An argparse ``type=`` that parses ``kind`` and rejects values failing ``ok``."""

    def parse(text: str):
        try:
            if ok(value := kind(text)):
                return value
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")

    return parse


_positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
_positive_float = _number(float, lambda v: v > 0, "a number > 0")
_non_negative_float = _number(float, lambda v: v >= 0, "a number >= 0")
_fraction = _number(float, lambda v: 0 < v <= 1, "a fraction in (0, 1], e.g. 0.35")
_port = _number(int, lambda v: 1 <= v <= 65535, "a TCP port in 1-65535")


def _env(args) -> int:
    from pt2aws import env

    report = env.collect(args.profile)
    print(json.dumps(report, indent=2) if args.json else env.format_report(report))
    return 0


def _recommend(args) -> int:
    from pt2aws.lessons import ec2
    from pt2aws.sizing import pricing, ranking, tables
    from pt2aws.sizing.workload import profile_workload

    workload = profile_workload(args.profile, args.examples, args.model, args.epochs)
    shape = {k: getattr(args, k) for k in ("seq_len", "micro_batch") if getattr(args, k)}
    workload = dataclasses.replace(workload, precision=args.precision, **shape)
    live = args.prices == "auto"  # the AWS Price List API where credentials allow, else the table
    session = _session("aws", args.region) if live else None
    instances = ranking.DEFAULT_INFERENCE_INSTANCES
    prices, notes = pricing.refresh_prices(session, instances, region=args.region, enabled=live)
    rec = ranking.recommend(workload, args.mfu, args.overhead_s, args.region, prices)
    rec["price_notes"], plan, choice = notes, None, rec["recommended"]
    if choice:
        session = None if args.aws_target == "none" else _session(args.aws_target, args.region)
        try:
            plan = ec2.launch_plan(
                choice["instance"], choice["nodes"], session=session, region=args.region
            )
        finally:
            if session is not None:
                session.close()
    if args.json:
        print(json.dumps({"recommendation": rec, "launch_plan": plan}, indent=2, default=str))
        return 0
    print(tables.format_recommendation(rec, limit=args.top), "\n".join(notes), sep="\n")
    if plan:
        print("\n" + ec2.format_launch_plan(plan))
    return 0


def _session(target: str, region: str | None):
    """``aws`` (your account) or ``emulator`` (local moto)."""
    if target == "emulator":
        from pt2aws.emulator import server as aws_emulator

        return aws_emulator.start(region or "", model_servers=False)
    from pt2aws.aws.session import connect

    return connect(region=region or "")


def _cleanup(args) -> int:
    from pt2aws.aws.deploy import delete_resources
    from pt2aws.aws.session import billable_resources

    if not args.prefix:
        raise UserError("refusing to clean up without a --prefix: pass e.g. --prefix pt2aws-")
    session = _session("aws", args.region)
    session.account()  # no credentials, AWS unreachable: one line naming the fix
    found = billable_resources(session, prefix=args.prefix)
    names = sorted(
        {n for key, values in found.items() if key != "scalable_targets" for n in values}
        | {r.split("/")[1] for r in found["scalable_targets"]}  # endpoint/<name>/variant/<v>
    )
    for kind, values in found.items():
        for name in values:
            print(f"{kind:16s} {name}")
    if not names:
        print(f"nothing starts with {args.prefix!r}")
        return 0
    if not args.yes:
        print("dry run: add --yes to delete these")
        return 0
    for name in names:
        for kind, deleted in delete_resources(session, name):
            print(f"deleted {kind} {deleted}")
    return 0


def _serve(args) -> int:
    import time

    from pt2aws.serving.local import LocalServer, server_missing

    if not Path(args.model).exists():
        raise MissingFileError(
            f"model {args.model} does not exist: pass a model.tar.gz (a run's deploy/) or a "
            "folder written by save_pretrained (a run's train/model)"
        )
    missing = server_missing()
    if missing:
        raise UserError(f"the local serving stack cannot run here: {missing}")
    workdir = Path(args.workdir or Path(args.model).resolve().parent / "serve")
    with LocalServer(args.model, workdir, port=args.port, workers=args.workers) as endpoint:
        print(f"serving {args.model} at {endpoint.url} (/ping, /invocations); logs in {workdir}")
        print(f"try: curl -s {endpoint.url}/invocations -H 'Content-Type: application/json' "
              """-d '{"inputs": ["great phone"]}'\nCtrl-C stops the server""")  # fmt: skip
        try:
            while endpoint.running:
                time.sleep(1)
        except KeyboardInterrupt:
            print("stopping")
    return 0


def build_parser() -> ArgumentParser:
    """The parser of ``env``, ``recommend``, ``serve`` and ``cleanup`` (``train`` and ``run``
    are listed for ``--help``; their flags go to their own parsers)."""
    parser = ArgumentParser(
        prog="pt2aws", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("env", help="environment report and suggested instance")
    env.add_argument("--profile", default="local", choices=PROFILES)
    env.add_argument("--json", action="store_true", help="print the report as JSON")
    env.set_defaults(func=_env)

    rec = sub.add_parser("recommend", help="size a workload: memory, instance costs, launch plan")
    rec.add_argument("--profile", default="full", choices=PROFILES, help="full: roberta-base")
    for name, kind, default, help in (
        ("--model", str, None, "roberta-base, 70B, 350M, a count (7e9)"),
        ("--examples", _positive_int, None, "training examples"),
        ("--epochs", _positive_float, None, "epochs"),
        ("--seq-len", _positive_int, None, "tokens per example"),
        ("--micro-batch", _positive_int, None, "sequences per device"),
        ("--mfu", _fraction, None, "assumed MFU for all kinds"),
        ("--overhead-s", _non_negative_float, 600.0, "paid start-up per node, seconds"),
        ("--top", _positive_int, None, "rows of the training table"),
        ("--region", str, "us-east-1", "prices and launch plan region"),
    ):
        rec.add_argument(name, type=kind, default=default, help=help)
    for name, choices, help in (  # the first choice is the default
        ("--precision", PRECISIONS, "training precision"),
        ("--aws-target", ("none", "emulator", "aws"), "launch plan: none (no AWS call), "
         "emulator (local moto), aws (DryRun in your account)"),
        ("--prices", ("auto", "table"), "auto: the AWS Price List API where credentials allow, "
         "else the dated table"),
    ):  # fmt: skip
        rec.add_argument(name, default=choices[0], choices=choices, help=help)
    rec.add_argument("--json", action="store_true", help="print JSON")
    rec.set_defaults(func=_recommend)

    clean = sub.add_parser("cleanup", help="list (--yes: delete) SageMaker resources by prefix")
    clean.add_argument("--prefix", required=True)
    clean.add_argument("--region", default=None)
    clean.add_argument("--yes", action="store_true", help="really delete (default: dry run)")
    clean.set_defaults(func=_cleanup)

    serve = sub.add_parser("serve", help="serve model.tar.gz (or a model folder) locally")
    serve.add_argument("model", help="model.tar.gz or a folder written by save_pretrained")
    serve.add_argument("--port", type=_port, default=None, help="inference port (default: free)")
    serve.add_argument("--workers", type=_positive_int, default=1, help="server processes")
    serve.add_argument("--workdir", default=None, help="logs/config (default: MODEL's dir/serve)")
    serve.set_defaults(func=_serve)
    sub.add_parser("train", help="fine-tune (flags: python -m pt2aws.train --help)")
    sub.add_parser("run", help="run notebooks 00-03 into runs/<timestamp> (flags: --profile)")
    return parser


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["train"]:
        from pt2aws.train import loop

        loop.main(argv[1:])
        return 0
    if argv[:1] == ["run"]:
        from pt2aws import pipeline

        return pipeline.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    """Run ``pt2aws <verb>`` with ``argv`` (default ``sys.argv[1:]``); 2 after a user error."""
    argv = sys.argv[1:] if argv is None else list(argv)
    verb = next((a for a in argv if a in VERBS), None)
    return run_cli(_dispatch, argv, prog=f"pt2aws {verb}" if verb else "pt2aws")


if __name__ == "__main__":
    raise SystemExit(main())
