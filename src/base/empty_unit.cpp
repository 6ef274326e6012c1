// Compiled into a folder library that has no sources yet (CMake needs one).
