// The emulators' arrays on disk: raw binary files that the Python tests write and read back.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// The whole file as T values (a missing file exits 2: the test reads that as a failure).
template <typename T>
std::vector<T> read_bin(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "cannot open %s\n", path.c_str());
        std::exit(2);
    }
    std::fseek(f, 0, SEEK_END);
    const long bytes = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<T> v(bytes / sizeof(T));
    if (std::fread(v.data(), sizeof(T), v.size(), f) != v.size()) std::exit(3);
    std::fclose(f);
    return v;
}

template <typename T>
void write_bin(const std::string& path, const T* v, size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(v, sizeof(T), n, f);
    std::fclose(f);
}

template <typename T>
void write_bin(const std::string& path, const std::vector<T>& v) {
    write_bin(path, v.data(), v.size());
}
