# Installation of the plugin ABI (header, pkg-config, CMake package): written with the loader.
