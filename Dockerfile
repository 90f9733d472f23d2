# The operator image; the Spark job image is spark_templates/Dockerfile. Without a
# Docker engine, `python -m dvstack.images.build build` builds both with buildah, on base
# images of its own passed as PYTHON_IMAGE (stack/dvstack/images/build.py).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip install --no-cache-dir --prefix=/install .

FROM ${PYTHON_IMAGE}
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin derived-views
COPY --from=build /install /usr/local
COPY spark_templates/sparkapplication.yaml /opt/derived-views/spark_templates/sparkapplication.yaml
ENV DV_SPARK_TEMPLATE=/opt/derived-views/spark_templates/sparkapplication.yaml
USER 10001
ENTRYPOINT ["derived-views-operator"]
