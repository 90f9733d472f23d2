"""The project's images, built from its Dockerfiles with buildah on base images made from
Debian and PyPI (`build`), and OCI archives to import into the node (`oci_archive`).
`python -m dvstack.images build` builds them."""
