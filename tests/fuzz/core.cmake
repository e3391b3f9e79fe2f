# fuzz targets for core: being written
