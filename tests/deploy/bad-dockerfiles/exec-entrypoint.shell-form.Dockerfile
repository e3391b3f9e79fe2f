# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule exec-entrypoint.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

FROM debian:12.8-slim
COPY --from=build /artifact /artifact
USER 10001
ENTRYPOINT ibus run
