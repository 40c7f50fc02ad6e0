"""Shell completion: `kubetrain completion bash|zsh|fish` prints a script; the script asks
`kubetrain __complete WORD... CURRENT` for the candidates, so the shells share one implementation that
knows the verbs, each verb's flags and their choices, job ids (from the local store, or the cluster the
words typed so far name: `--backend k8s -n ml`), flavor names, and when to complete file paths.

The answer's first line is how to complete: `files` (the shell completes paths) or `words` (the lines that
follow, all starting with CURRENT). Job ids are read with a short limit and any error is swallowed: a
completion that fails says nothing rather than printing into the user's command line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence

from .registry import COMMANDS

SHELLS = ("bash", "zsh", "fish")
JOB_POSITIONALS = ("job", "jobs")
FILE_POSITIONALS = ("file", "files")
MAX_IDS = 200
"""Job ids offered at most (newest first): enough to pick from, few enough to list fast on a cluster."""

BASH = r"""# kubetrain completion for bash: eval "$(kubetrain completion bash)" (e.g. in ~/.bashrc)
_kubetrain() {
    local cur="${COMP_WORDS[COMP_CWORD]}" line="${COMP_LINE:0:COMP_POINT}" IFS=$'\n'
    local -a words reply
    # The words as typed, '=' kept inside them (bash splits --for=condition=X at each '=').
    IFS=$' \t' read -r -a words <<< "$line"
    [[ "$line" =~ [[:space:]]$ ]] && words+=("")
    IFS=$'\n'
    reply=($(command kubetrain __complete "${words[@]:1}" 2>/dev/null))
    if [[ "${reply[0]}" == files ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi
    # Candidates are whole words; bash replaces only what follows the last '=' or ':'.
    local full="${words[${#words[@]}-1]}" prefix
    prefix="${full%"$cur"}"
    COMPREPLY=()
    local c
    for c in "${reply[@]:1}"; do COMPREPLY+=("${c#"$prefix"}"); done
}
complete -F _kubetrain kubetrain
"""

ZSH = r"""#compdef kubetrain
# kubetrain completion for zsh: eval "$(kubetrain completion zsh)" in ~/.zshrc, after compinit
# (zsh keeps --for=condition=X one word: the candidates are whole words).
_kubetrain() {
    local -a reply
    reply=("${(@f)$(command kubetrain __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ "${reply[1]}" == files ]]; then
        _files
    else
        compadd -Q -- "${(@)reply[2,-1]}"
    fi
}
compdef _kubetrain kubetrain
"""

FISH = r"""# kubetrain completion for fish: kubetrain completion fish > ~/.config/fish/completions/kubetrain.fish
function __kubetrain_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l current (commandline -ct)
    set -l reply (command kubetrain __complete $words "$current" 2>/dev/null)
    if test "$reply[1]" = files
        __fish_complete_path "$current"
    else
        set -e reply[1]
        printf '%s\n' $reply
    end
end
complete -c kubetrain -f -a '(__kubetrain_complete)'
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def script(shell: str) -> str:
    return SCRIPTS[shell]


def _subparser(verb: str) -> argparse.ArgumentParser:
    from .main import build_parser

    parser = build_parser(verb)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[verb]


def candidates(words: Sequence[str]) -> tuple[str, list[str]]:
    """What completes the last of `words` (the words after `kubetrain`, the one being typed last)."""
    *before, current = words or [""]
    verbs = list(COMMANDS)
    if not before:
        if current.startswith("-"):
            return "words", [w for w in ("--help", "--version") if w.startswith(current)]
        return "words", [v for v in verbs if v.startswith(current)]
    verb = before[0]
    if verb == "completion":
        return "words", [s for s in SHELLS if s.startswith(current)] if len(before) == 1 else []
    if verb not in COMMANDS:
        return "words", []
    parser = _subparser(verb)
    flags = {s: a for a in parser._actions for s in a.option_strings}
    if current.startswith("-") and "=" in current:  # --flag=VALUE: the flag's values, written the same way
        flag, _, value = current.partition("=")
        action = flags.get(flag)
        values = _values(action, value, before) if action is not None else []
        return "words", [f"{flag}={v}" for v in values]
    previous = before[-1] if len(before) > 1 else ""
    action = flags.get(previous)
    if action is not None and action.nargs != 0:
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        if action.dest == "kubeconfig" or metavar.upper() in ("FILE", "PATH"):
            return "files", []
        return "words", _values(action, current, before)
    if current.startswith("-"):
        # Long flags (a short one only once typed whole): the list stays one of names that explain themselves.
        return "words", sorted(s for s in flags if (s.startswith(current) and s.startswith("--")) or s == current)
    positional = next((a for a in parser._actions if not a.option_strings), None)
    if positional is None:
        return "words", []
    if positional.dest in FILE_POSITIONALS:
        return "files", []
    if positional.dest in JOB_POSITIONALS:
        return "words", [i for i in job_ids(parser, before[1:]) if i.startswith(current)]
    return "words", []


def _values(action: argparse.Action, current: str, before: Sequence[str]) -> list[str]:
    """The values a flag takes: its choices, or what `--for` is written as."""
    if action.dest == "wanted":  # wait --for
        from .commands.wait import CONDITIONS, PHASES

        offered = [f"condition={c}" for c in CONDITIONS] + [f"phase={p}" for p in PHASES] + ["delete"]
        return [o for o in offered if o.startswith(current)]
    return [str(c) for c in action.choices or () if str(c).startswith(current)]


def job_ids(parser: argparse.ArgumentParser, typed: Sequence[str]) -> list[str]:
    """The ids of the jobs of the backend the words typed name (the local store by default), newest first."""
    from .options import open_backend_for

    with contextlib.suppress(Exception, SystemExit), contextlib.redirect_stderr(io.StringIO()):
        for action in parser._actions:  # only the flags that locate the jobs matter: nothing is required here
            action.required = False
            if not action.option_strings:
                action.nargs = "*"
        args, _ = parser.parse_known_args([w for w in typed if w], argparse.Namespace())
        with open_backend_for(args) as backend:
            return [status.job_id for status in backend.list(limit=MAX_IDS)]
    return []


def complete(words: Sequence[str]) -> int:
    """`kubetrain __complete WORD... CURRENT`: the directive, then the candidates, a line each."""
    how, found = candidates(words)
    sys.stdout.write("\n".join([how, *found]) + "\n")
    return 0


__all__ = ["SHELLS", "candidates", "complete", "script"]
