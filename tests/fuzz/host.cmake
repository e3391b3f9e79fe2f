# fuzz targets for host: being written
