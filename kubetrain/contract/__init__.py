"""The vocabulary every layer of kubetrain shares, each piece defined once: label and annotation keys, the
`KUBETRAIN_*` variables of a replica's environment, Kubernetes' naming rules, its `$(VAR)` expansion, log
records and their filters, the exception root, and the names of backends, flavors and frameworks.

Standard library only, and importing nothing else of kubetrain: the in-replica resolver (which may run in
an image without pydantic), the CLI's parser (which must stay fast) and every backend import it freely.
"""
