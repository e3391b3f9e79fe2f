# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule no-secrets.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

FROM debian:12.8-slim
COPY --from=build /artifact /artifact
ENV IB_TOKEN s3cr3t
USER 10001:10001
ENTRYPOINT ["ibus", "run"]
