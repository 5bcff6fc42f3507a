"""`dpguard schema`: print the manifest JSON Schema (for yaml-language-server and editors)."""

from __future__ import annotations

import argparse
import sys

HELP = "print the manifest JSON Schema"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from dpguard.resources import read_text

    sys.stdout.write(read_text("dpguard.schemas", "manifest.schema.json"))
    return 0
