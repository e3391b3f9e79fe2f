# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule pinned-base.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

ARG BASE=debian:12.8-slim
FROM ${BASE}
COPY --from=build /artifact /artifact
USER 10001:10001
ENTRYPOINT ["ibus", "run"]
