// Shapes of classes that a reader may lack (docs/types.md, "Classes this
// program lacks"), stored among shapes.hpp's Circles and Rects:
//   - Dot has every virtual function defined in the class (no key function),
//     so only a program that constructs a Dot has its vtable;
//   - Hexagon's key function is in hexagon/hexagon.cpp, built into a static
//     library, whose object file the linker leaves out of a program that
//     refers to nothing in it.
#pragma once

#include "shapes.hpp"

namespace geo {

class Dot : public Shape, public Named {
public:
    Dot() { std::strcpy(label, "dot"); }
    double area() const override { return 0; }
    int corners() const override { return 1; }
    std::string name() const override { return std::string("dot of ") + std::to_string(weight); }
    int weight = 1;
    STEPPE_BASES(Shape, Named)
    STEPPE_FIELDS(weight)
};

class Hexagon : public Shape, public Named {
public:
    explicit Hexagon(double side);
    double area() const override;  // key function, in the static library
    int corners() const override { return 6; }
    double side;
    STEPPE_BASES(Shape, Named)
    STEPPE_FIELDS(side)
};

// Both views of each shape: shapes[i] is its Shape (the primary vptr),
// names[i] its Named (a secondary vptr of the same vtable group).
struct Gallery {
    static constexpr int count = 8;
    Shape* shapes[count];
    Named* names[count];
};

// What the writer puts at each index.
inline constexpr const char* gallery_labels[Gallery::count] = {"circle", "rect", "dot", "hexagon",
                                                                "circle", "dot",  "hexagon", "rect"};

}  // namespace geo
