"""`kubetrain completion SHELL`: the completion script of bash, zsh or fish (`cli.completion`)."""

from __future__ import annotations

import argparse

from ..completion import SHELLS, script

EPILOG = """\
install:
  bash   echo 'eval "$(kubetrain completion bash)"' >> ~/.bashrc
  zsh    echo 'eval "$(kubetrain completion zsh)"' >> ~/.zshrc    # after compinit
  fish   kubetrain completion fish > ~/.config/fish/completions/kubetrain.fish

It completes verbs, flags and their values (--flavor, --backend, -o, wait --for), job ids (from the local
store, or from the cluster the line names: --backend k8s -n NAMESPACE) and file paths."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    print(script(args.shell), end="")
    return 0
