"""The controllers' contracts: for each foreign kind, every variable, file and host name its own controller
gives a container, per replica (docs/foreign.md has them as tables, held to the code by a test).

`CONTRACTS` is the registry, keyed by (apiVersion, kind) as `spec.controller` names them: a job whose
`spec.controller` is set is wired by its contract (`plan()`), not by its framework, on every backend that runs it
without that controller.
"""

from __future__ import annotations

from ...jobspec.controller import Controller
from . import jobset, kubeflow, mpi_operator, t9k, volcano
from .base import FILES_ROOT, Contract, ContractContext, Row

CONTRACTS: dict[tuple[str, str], Contract] = {
    contract.key: contract
    for contract in (*kubeflow.CONTRACTS, *mpi_operator.CONTRACTS, *volcano.CONTRACTS, *jobset.CONTRACTS,
                     *t9k.CONTRACTS)
}
"""(apiVersion, kind) → its controller's contract; one per `jobspec.controller.CONTROLLER_KINDS` entry."""


def contract_of(controller: Controller) -> Contract:
    return CONTRACTS[(controller.api_version, controller.kind)]


def role_port(controller: Controller, role: str) -> int:
    """The port a role's containers use under `controller`: the one the source names, else its default."""
    found = controller.roles.get(role)
    if found is not None and found.port is not None:
        return found.port
    return contract_of(controller).default_port(controller, found.name if found is not None else role)


__all__ = ["CONTRACTS", "FILES_ROOT", "Contract", "ContractContext", "Row", "contract_of", "role_port"]
