"""The `kubetrain` command line: thin verbs over the library, in kubectl's habits."""
