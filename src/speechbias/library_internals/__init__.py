"""The only place that touches a library's internals (one module per library), each use behind the
library versions it was checked with and with a docstring saying why no public API does the job."""
