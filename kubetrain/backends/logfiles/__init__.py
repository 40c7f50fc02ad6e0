"""Log files in the kubelet's CRI container log format, as both backends keep them: the record format
(`format`), reading with filters, merged across replicas (`reader`), and writing, rotated and never losing a
line silently (`writer`). The local backend writes its replicas' logs with them; the Kubernetes backend keeps
what it read of a job's logs (`kept`), so `kubetrain logs` still answers once the pods are gone."""
