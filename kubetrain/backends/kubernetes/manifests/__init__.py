"""The parts every flavor's manifests share: the render context (`context.Ctx`: the wired roles, the layout, the
problems found), pod templates, entrypoints, volumes, resources, policies, Services, RBAC and MPI's ssh.

Below the flavors (:mod:`..flavors`), which build their workload objects from these parts, and below the
render facade (:mod:`..render`), which picks the flavor and puts the parts together: nothing here knows a
flavor by name or imports one — a `Ctx` hands the flavor down.
"""
