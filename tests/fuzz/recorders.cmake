# fuzz targets for recorders: being written
