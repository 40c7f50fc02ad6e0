"""The kubeconfig's block YAML read without PyYAML: what it reads it reads as PyYAML's safe loader does, and what it
does not know (or what PyYAML refuses) it leaves to PyYAML. Compared with PyYAML on kubeconfigs in the shapes the
tools write, on many random documents PyYAML dumped, and on many mutilated kubeconfigs."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from kubetrain.backends.kubernetes.client.block_yaml import load

# The shape `kubectl config view --raw` and client-go write: sequences at their key's indent, `{}` preferences.
KUBECTL = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pP
    server: https://10.0.0.1:6443
  name: prod
- cluster:
    insecure-skip-tls-verify: true
    server: http://127.0.0.1:8080
    proxy-url: http://proxy.corp:3128
  name: lab
contexts:
- context:
    cluster: prod
    namespace: team-a
    user: alice
  name: prod
- context:
    cluster: lab
    user: "bob@lab"
  name: lab
current-context: prod
kind: Config
preferences: {}
users:
- name: alice
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==
- name: bob@lab
  user:
    token: 0f3a9c1e77b2d4aa
"""

# Written by hand: comments, quotes, sequences indented under their key, a token file, an empty value.
BY_HAND = """\
# the lab cluster, reached through the bastion
apiVersion: v1
kind: Config
current-context: 'lab'   # the default
clusters:
  - name: lab
    cluster:
      server: "https://api.lab.example:443"
      tls-server-name: api.internal
      certificate-authority: ./ca.pem
contexts:
  - name: lab
    context: {cluster: lab, user: me}
users:
  - name: me
    user:
      tokenFile: /var/run/secrets/token
      token:
"""

SUBSET = [KUBECTL, BY_HAND.replace("    context: {cluster: lab, user: me}\n",
                                   "    context:\n      cluster: lab\n      user: me\n")]

# Beyond the block subset: PyYAML reads them (or refuses them).
BEYOND = {
    "flow mapping": BY_HAND,
    "anchor": "a: &x 1\nb: *x\n",
    "block scalar": "a: |\n  text\n",
    "tag": "a: !!str 1\n",
    "float": "a: 1.5\n",
    "octal": "a: 0755\n",
    "date": "a: 2026-11-27\n",
    "base 60": "a: 1:30\n",
    "wrapped plain scalar": "a: one\n  two\n",
    "escape": 'a: "tab\\there"\n',
    "tab indent": "a:\n\tb: 1\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "byte order mark": "\ufeffa: 1\n",
    "boolean key": "true: 1\n",
    "merge key": "<<: {}\n",
}


@pytest.mark.parametrize("text", SUBSET, ids=["kubectl", "by-hand"])
def test_the_shapes_tools_write_are_read_as_pyyaml_reads_them(text: str) -> None:
    assert load(text) is not None
    assert load(text) == yaml.safe_load(text)


def test_values_resolve_as_pyyaml_resolves_them() -> None:
    for value in ("true", "False", "yes", "off", "~", "null", "", "0", "-12", "3e5a9f00", "1e3", "x#y", "'it''s'",
                  "''", '""', "[]", "{}", "a:b", "-a", ".a", "+a", "é"):
        text = f"key: {value}\n"
        assert load(text) == yaml.safe_load(text), value


@pytest.mark.parametrize("text", BEYOND.values(), ids=BEYOND.keys())
def test_what_it_does_not_know_is_left_to_pyyaml(text: str) -> None:
    assert load(text) is None


def test_an_empty_file_or_only_comments_is_an_empty_document() -> None:
    assert load("") == {} and load("# nothing yet\n\n") == {}


ALPHABET = [*"abcXYZ019:-_ #'\"\\/=+.,@!&*?|>%{}[]é~", " ", "  "]
WORDS = ["true", "no", "on", "null", "~", "0", "007", "1e3", "1.5", "0x1f", "2026-11-27", "12:30", "-1", "+1",
         ".inf", "", "<<", "=", "y"]


def _text(r: random.Random) -> str:
    if r.random() < 0.25:
        return r.choice(WORDS)
    return "".join(r.choice(ALPHABET) for _ in range(r.randint(1, 12)))


def _value(r: random.Random, depth: int) -> Any:
    x = r.random()
    if depth > 3 or x < 0.5:
        return _text(r) if r.random() < 0.7 else r.choice([True, False, None, 0, 5, -3, 12345678901234567890])
    if x < 0.75:
        return {_text(r): _value(r, depth + 1) for _ in range(r.randint(0, 4))}
    return [_value(r, depth + 1) for _ in range(r.randint(0, 4))]


def test_random_documents_pyyaml_dumped_read_alike() -> None:
    read = 0
    for seed in range(600):
        r = random.Random(seed)
        doc = {_text(r): _value(r, 0) for _ in range(r.randint(1, 5))}
        for options in ({}, {"indent": 4}, {"allow_unicode": True}):
            text = yaml.safe_dump(doc, default_flow_style=False, **options)
            got = load(text)
            if got is not None:
                assert got == yaml.safe_load(text), text
                read += 1
    assert read > 300  # not a reader that leaves everything to PyYAML


MUTATIONS = [*" -:#'\"\n\t{}[]&*!|>0a\\", "  ", "\n  ", "- ", ": "]


def test_mutilated_kubeconfigs_are_read_alike_or_left_to_pyyaml() -> None:
    """Characters inserted, removed or replaced: where PyYAML refuses the file, so does this reader; where
    PyYAML reads it, this reader reads the same or leaves it."""
    read = refused = 0
    for seed in range(2500):
        r = random.Random(seed)
        text = r.choice(SUBSET)
        for _ in range(r.randint(1, 4)):
            i = r.randrange(len(text))
            op = r.random()
            if op < 0.4:
                text = text[:i] + r.choice(MUTATIONS) + text[i:]
            elif op < 0.8:
                text = text[:i] + text[i + 1:]
            else:
                text = text[:i] + r.choice(MUTATIONS) + text[i + 1:]
        got = load(text)
        try:
            want = yaml.safe_load(text)
        except yaml.YAMLError:
            assert got is None, text
            refused += 1
            continue
        if got is not None:
            assert got == want, text
            read += 1
    assert read > 500 and refused > 500
