# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule non-root-user.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

FROM debian:12.8-slim
COPY --from=build /artifact /artifact
USER ibus
ENTRYPOINT ["ibus", "run"]
