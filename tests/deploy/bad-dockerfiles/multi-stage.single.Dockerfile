# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule multi-stage.
FROM debian:12.8-slim
USER 10001
ENTRYPOINT ["ibus", "run"]
