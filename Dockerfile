# The operator image. Built elsewhere (no Docker engine on the dev machines);
# the Spark job image is spark_templates/Dockerfile.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin derived-views
COPY --from=build /install /usr/local
COPY spark_templates/sparkapplication.yaml /opt/derived-views/spark_templates/sparkapplication.yaml
ENV DV_SPARK_TEMPLATE=/opt/derived-views/spark_templates/sparkapplication.yaml
USER 10001
ENTRYPOINT ["derived-views-operator"]
