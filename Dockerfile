# gpu-compactor: `docker build -t REGISTRY/gpu-compactor:TAG . && docker push REGISTRY/gpu-compactor:TAG`,
# then set that image in the overlay you apply (manifests/overlays/*/kustomization.yaml, `images:`).
# The image runs as an unprivileged user and needs no writable root filesystem (mount /tmp).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY compactor ./compactor
# constraints.txt pins every runtime dependency: the image ships what CI tested (.ci/run installs with it too).
RUN pip install --no-cache-dir --root-user-action=ignore --prefix=/install -c constraints.txt .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /install /usr/local
RUN groupadd --gid 10001 compactor \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin compactor
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["compactor"]
CMD ["--help"]
