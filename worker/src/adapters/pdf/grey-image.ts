/** An image as 8-bit grey pixels, row after row: what OCR reads, whatever the image was stored as. */
export interface GreyImage {
  width: number;
  height: number;
  grey: Uint8Array;
}

/**
 * The image as a binary PGM (`P5`), a format Tesseract's image library reads without a codec: the
 * cheapest way to hand it decoded pixels.
 */
export function toPgm({ width, height, grey }: GreyImage): Buffer {
  return Buffer.concat([Buffer.from(`P5\n${width} ${height}\n255\n`, 'latin1'), Buffer.from(grey)]);
}
