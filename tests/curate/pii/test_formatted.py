"""Formatted identifiers: each kind in the forms users write it, masked; numbers that are
not identifiers (lengths, years, dates, prices, failed check digits) left alone."""

from __future__ import annotations

import pytest

from essaybench.curate.pii import find_personal_data


def found(text: str) -> list[tuple[str, str]]:
    return [(s.kind, text[s.start:s.end]) for s in find_personal_data(text, names="off")]


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("电话13812345678，谢谢", "phone", "13812345678"),
    ("打138 1234 5678找我", "phone", "138 1234 5678"),
    ("手机：138-1234-5678。", "phone", "138-1234-5678"),
    ("call +86 13912345678 please", "phone", "+86 13912345678"),
    ("号码0086-15012345678", "phone", "0086-15012345678"),
    ("全角１３８１２３４５６７８也算", "phone", "１３８１２３４５６７８"),
    ("座机010-62345678", "phone", "010-62345678"),
    ("座机(0755)1234567", "phone", "(0755)1234567"),
    ("打021 6123 4567", "phone", "021 6123 4567"),
    ("客服400-123-4567", "phone", "400-123-4567"),
    ("身份证号11010519491231002X，", "id_card", "11010519491231002X"),
    ("身份证11010519491231002x", "id_card", "11010519491231002x"),
    ("身份证号码：110105491231002", "id_card", "110105491231002"),
    ("发到wang.xm-2008@163.com就行", "email", "wang.xm-2008@163.com"),
    ("卡号4111 1111 1111 1111，", "bank_card", "4111 1111 1111 1111"),
    ("卡号6222020200112233446", "bank_card", "6222020200112233446"),
    ("链接 https://a.example.com/p?id=3&token=abc123，打开", "url_token",
     "https://a.example.com/p?id=3&token=abc123"),
    ("服务器192.168.1.10。", "ip", "192.168.1.10"),
    ("地址2001:db8::8a2e:370:7334连不上", "ip", "2001:db8::8a2e:370:7334"),
    ("我的QQ号是123456789", "qq", "123456789"),
    ("扣扣：2345678", "qq", "2345678"),
    ("加微信 wxid_abc123 聊", "wechat", "wxid_abc123"),
    ("VX：Zhang_Wei2008", "wechat", "Zhang_Wei2008"),
    ("车牌京A12345的车", "plate", "京A12345"),
    ("新能源粤B·D12345", "plate", "粤B·D12345"),
    ("打+86-551-4864407找我", "phone", "+86-551-4864407"),
    ("登录 http://192.168.2.190:8080/admin/login?auth_token=ac8a9315d7 看看", "url_token",
     "http://192.168.2.190:8080/admin/login?auth_token=ac8a9315d7"),
    ("写完v我 wxid_7nvkej0d84vv68 请你喝奶茶", "wechat", "wxid_7nvkej0d84vv68"),
    ("（我的号：t809598989——微信）", "wechat", "t809598989"),
    ("扣扣空间里发了我的作文，号码49430，你去看看", "qq", "49430"),
    ("服务器 fe80::85da:b7f8:95ea:e40e:8080 连不上", "ip", "fe80::85da:b7f8:95ea:e40e"),
    ("IPv6: fe80::d6d8:b83e:31ed:9255，登不上", "ip", "fe80::d6d8:b83e:31ed:9255"),
    ("老身份证是15位的440305940418608，新的换了", "id_card", "440305940418608"),
    ("家住滨江路18号3单元", "address", "滨江路18号3单元"),
    ("地址：上海市徐汇区漕溪北路88号。", "address", "上海市徐汇区漕溪北路88号"),
    ("寄到阳光小区3栋2单元501室", "address", "阳光小区3栋2单元501室"),
])
def test_each_kind_is_found(text: str, kind: str, value: str) -> None:
    assert found(text) == [(kind, value)]


@pytest.mark.parametrize("text", [
    "以“门”为题写一篇不少于800字的记叙文。",
    "600-800字，2024年10月1日前交，满分60分。",
    "写于2023.9.1，共3页，初二(3)班，第12页。",
    "¥1,299.00 的书包，打八折，降价30%。",
    "2023年全国甲卷作文题，考生约1291万人。",
    "ISBN 978-7-02-000220-6 的《朝花夕拾》。",
    "遇到危险拨打110、119、120。",
    "版本v1.2.3.4发布，π≈3.14159。",
    "身份证号110105194912310021（校验位不对）",
    "卡号4111 1111 1111 1112（Luhn 不对）",
    "12345678901 不是手机号",
    "时间12:30:45，比分3:2。",
    "访问 https://example.com/page?id=3 查资料",
    "以“中山路”为题，写人民路上的变化。",
    "800-1000字，写出400多年的历史。",
    "学校在徐汇区漕溪北路88号，写写校园。",
    "上次发你的610113200712018957是我抄错的（校验位不对，碰巧过 Luhn）",
])
def test_numbers_that_are_no_identifier_stay(text: str) -> None:
    assert found(text) == []


def test_a_phone_inside_a_group_of_digit_blocks_is_not_one() -> None:
    # 16 digits failing Luhn: not a card, and no phone number inside it either.
    assert found("卡号 6222 0212 3456 7897 不对") == []


def test_an_id_card_that_passes_luhn_is_an_id_card() -> None:
    # Overlaps resolve by priority: the ID card wins over a Luhn-valid 18-digit run.
    kinds = [k for k, _ in found("证件 11010519491231002X 和 4111111111111111")]
    assert kinds == ["id_card", "bank_card"]


def test_fold_table_folds_every_code_point_as_nfkc_one_character_at_a_time() -> None:
    # fold translates through a table filled on first sight (collect's speed at 10^6
    # records); it must equal the per-character NFKC it replaced on every code point.
    import unicodedata

    from essaybench.curate.pii.formatted import fold

    def one_at_a_time(text: str) -> str:
        out = []
        for ch in text:
            folded = unicodedata.normalize("NFKC", ch)
            out.append(folded if len(folded) == 1 else ch)
        return "".join(out)

    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for start in range(0, len(chars), 4096):
        text = "".join(chars[start:start + 4096])
        assert fold(text) == one_at_a_time(text)
    assert fold("全角１３８＠ｑｑ．ｃｏｍ，ﬁ") == "全角138@qq.com,ﬁ"


def test_finders_skipped_for_missing_characters_change_nothing() -> None:
    # formatted_spans skips a finder when the text lacks what every match of its pattern
    # holds (digits, an ASCII letter, @, a colon or dot): on every text the tests and the
    # labelled set use, and on variants with the digits and letters stripped, the spans
    # must be those of running every finder.
    import json
    import re

    from essaybench.core.paths import resource
    from essaybench.curate.pii.formatted import FINDERS, Span, fold, formatted_spans

    def every_finder(folded: str) -> list[Span]:
        taken: list[Span] = []
        for _, finder in FINDERS:
            for span in finder(folded):
                if not any(span.start < t.end and t.start < span.end for t in taken):
                    taken.append(span)
        return sorted(taken)

    kinds: list[pytest.Mark] = getattr(test_each_kind_is_found, "pytestmark", [])
    numbers: list[pytest.Mark] = getattr(test_numbers_that_are_no_identifier_stay,
                                         "pytestmark", [])
    texts = [p[0] for p in kinds[0].args[1]]
    texts += numbers[0].args[1]
    labelled = resource("data") / "deid" / "labelled.v1.jsonl"
    texts += [json.loads(line)["text"] for line in labelled.read_text(encoding="utf-8")
              .splitlines() if line.strip()]
    variants = [re.sub(pattern, "", t) for t in texts for pattern in ("[0-9０-９]", "[A-Za-z]")]
    for text in texts + variants:
        folded = fold(text)
        assert formatted_spans(folded) == every_finder(folded), text
