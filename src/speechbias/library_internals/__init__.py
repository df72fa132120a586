"""The only modules that touch a library's non-public interfaces: one module per library, each with a
checked version bound and a docstring saying why the internal is needed."""
