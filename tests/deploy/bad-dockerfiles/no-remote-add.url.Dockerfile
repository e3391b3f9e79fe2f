# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule no-remote-add.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

FROM debian:12.8-slim
COPY --from=build /artifact /artifact
ADD https://downloads.invalid/ibus.tar.gz /opt/
USER 10001:10001
ENTRYPOINT ["ibus", "run"]
